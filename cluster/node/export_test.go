package node

// SessionLost reports whether the agent's session has ended and it has
// not joined again yet (for the tests of package node_test).
func (a *Agent) SessionLost() bool { return a.sessionLost() }
