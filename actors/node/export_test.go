package node

// SessionLost reports whether the agent joined and its session has ended
// since (it has not joined again yet), as Forward finds it (for the
// tests of package node_test).
func (a *Agent) SessionLost() bool {
	n := a.node.Load()
	return n != nil && closed(n.Done())
}
