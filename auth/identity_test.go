package auth

import (
	"context"
	"testing"
)

func TestIdentityTravelsInTheContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("an empty context has an identity")
	}
	ctx := NewContext(context.Background(), Identity{Name: "bidder-eu", Roles: []Role{RoleInfer}, Method: "token"})
	id, ok := FromContext(ctx)
	if !ok || id.Name != "bidder-eu" || !id.Has(RoleInfer) || id.Has(RoleManage) {
		t.Errorf("FromContext = %+v, %v", id, ok)
	}
}

func TestParseRoleNamesTheRoles(t *testing.T) {
	for _, r := range Roles {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %q, %v", r, got, err)
		}
	}
	if _, err := ParseRole("root"); err == nil || err.Error() != `unknown role "root" (roles: infer, read, manage, admin)` {
		t.Errorf("ParseRole(root): %v", err)
	}
}
