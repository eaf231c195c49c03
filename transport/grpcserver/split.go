package grpcserver

import (
	"slices"

	"google.golang.org/grpc"

	"github.com/groveml/grove/auth"
)

// Split is a Registrar for two servers on two listeners, a public one and
// an admin one with a larger message limit: it registers every service on
// Public and, of each service, the methods AdminMethods names
// ("/package.Service/Method") on Admin too, as a service of those methods
// alone with their roles (reflection on Admin describes the whole
// service). A nil Admin registers on Public alone. Public serves those
// methods too unless its Options.ServedElsewhere names them.
type Split struct {
	Public, Admin *Server
	AdminMethods  []string
}

// Register registers impl on Public as desc describes, and the methods of
// desc AdminMethods names on Admin; it panics as Server.Register does.
func (s Split) Register(desc *grpc.ServiceDesc, impl any, roles map[string]auth.Role) {
	s.Public.Register(desc, impl, roles)
	if s.Admin == nil {
		return
	}
	sub := *desc
	sub.Methods, sub.Streams = nil, nil
	subRoles := map[string]auth.Role{}
	admin := func(name string) bool { return slices.Contains(s.AdminMethods, "/"+desc.ServiceName+"/"+name) }
	for _, m := range desc.Methods {
		if admin(m.MethodName) {
			sub.Methods = append(sub.Methods, m)
			subRoles[m.MethodName] = roles[m.MethodName]
		}
	}
	for _, st := range desc.Streams {
		if admin(st.StreamName) {
			sub.Streams = append(sub.Streams, st)
			subRoles[st.StreamName] = roles[st.StreamName]
		}
	}
	if len(sub.Methods)+len(sub.Streams) > 0 {
		s.Admin.Register(&sub, impl, subRoles)
	}
}
