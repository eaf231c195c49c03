package modelconfig

import "strings"

// LookupConfig returns the value of the request config named name (a
// sticky_key or one of key_features) in configs: the entry of that exact
// name, else one whose name differs only in case. Some protocols carry
// config names lowercased (Grove-Config-* headers, GraphPipe's configs),
// others as the caller wrote them (B&A and ForestFlow "configs"), so a
// name written "userId" in the model config finds "userid" too. Of
// several names that differ from name only in case, the least (in byte
// order) is taken, so that the same request always gets the same value.
func LookupConfig(configs map[string]string, name string) (string, bool) {
	if v, ok := configs[name]; ok {
		return v, true
	}
	var key, val string
	found := false
	for k, v := range configs {
		if strings.EqualFold(k, name) && (!found || k < key) {
			key, val, found = k, v, true
		}
	}
	return val, found
}
