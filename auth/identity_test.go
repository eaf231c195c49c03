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
	if _, err := ParseRole("root"); err == nil || err.Error() != `unknown role "root" (roles: infer, read, manage, admin, feedback)` {
		t.Errorf("ParseRole(root): %v", err)
	}
}

func TestFeedbackRoutesTakeFeedbackOrManageAndNothingElse(t *testing.T) {
	for _, tc := range []struct {
		holds []Role
		want  bool
	}{
		{[]Role{RoleFeedback}, true},
		{[]Role{RoleManage}, true},
		{[]Role{RoleInfer, RoleRead, RoleAdmin}, false},
		{nil, false},
	} {
		id := Identity{Name: "c", Roles: tc.holds, Method: MethodToken}
		if got := id.May(RoleFeedback); got != tc.want {
			t.Errorf("%v May(feedback) = %v, want %v", tc.holds, got, tc.want)
		}
	}
	// Manage stands in for feedback only: a feedback caller may not manage,
	// and a manager holds nothing else by it.
	fb := Identity{Roles: []Role{RoleFeedback}}
	mg := Identity{Roles: []Role{RoleManage}}
	if fb.May(RoleManage) || mg.May(RoleInfer) || mg.May(RoleRead) || mg.Has(RoleFeedback) {
		t.Error("a role stands in for more than feedback")
	}
}
