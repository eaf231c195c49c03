package modelconfig

import "strings"

// LookupConfig returns the value of the request config named name (a
// sticky_key or one of key_features) in configs: the entry of that exact
// name, else one whose name differs only in case. Some protocols carry
// config names lowercased (Grove-Config-* headers, GraphPipe's configs),
// others as the caller wrote them (B&A and ForestFlow "configs"), so a
// name written "userId" in the model config finds "userid" too.
func LookupConfig(configs map[string]string, name string) (string, bool) {
	if v, ok := configs[name]; ok {
		return v, true
	}
	for k, v := range configs {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
