package auth

import "fmt"

// Open marks a route or method that needs no credentials (the probes). It
// is not a role a caller can hold.
const Open Role = "open"

// CheckRequired returns an error unless r is a role a route or method can
// need: Open or one of Roles. Each protocol declares the role of each of
// its routes and methods where it registers them (httpserver.Server's
// Handle and Mount, grpcserver.Server's Register), which refuse one that
// fails this check.
func CheckRequired(r Role) error {
	if r == Open {
		return nil
	}
	if _, err := ParseRole(string(r)); err != nil {
		if r == "" {
			return fmt.Errorf("no role given: give one of infer, read, manage, admin, feedback, or open for none")
		}
		return fmt.Errorf("%q is not a role a route can need (roles: infer, read, manage, admin, feedback; or open for none)", r)
	}
	return nil
}
