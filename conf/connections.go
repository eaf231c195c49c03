package conf

// ConnectionLimits are default connection limits of the listeners.
type ConnectionLimits struct {
	// Public is the limit of each public listener (http; grpc's share is
	// the same).
	Public int
	// Admin is the limit of each admin listener (admin_http; admin_grpc's
	// share is the same).
	Admin int
}

// DefaultConnectionLimits sizes the listeners' connection limits for a
// process that may open fds files (RLIMIT_NOFILE, which Go raises to the
// hard limit at start), so that every listener full at once still leaves
// descriptors for the rest:
//
//	admin   = fds/64, from 16 to 256       each admin listener
//	reserve = fds/8, at least 256          model files, the bucket, Kafka, etcd, cluster peers
//	public  = (fds − reserve − 2·admin)/2  each public listener, at least 16
//
// With 20,000 descriptors: 256 per admin listener, 8,494 per public one;
// with 4,096: 64 and 1,728; with 1,024: 16 and 368.
func DefaultConnectionLimits(fds uint64) ConnectionLimits {
	n := int(min(fds, 1<<24))
	admin := min(max(n/64, 16), 256)
	reserve := max(n/8, 256)
	return ConnectionLimits{Public: max((n-reserve-2*admin)/2, 16), Admin: admin}
}
