// Package forward hands one model request from the Grove node that took it
// to a node of the same cluster that has the model ready, and brings the
// answer back: the transport of the cluster's routing (docs/cluster.md).
// Its messages are those of Grove's own service grove.cluster.v1.Forward
// (package forwardpb), which nodes call on each other on a framed
// transport of Grove's own (frame.go): the messages on TCP or TLS without
// HTTP/2, in frames of at most 64 KiB, a longer message chunked so that
// the frames of other calls go between its chunks, after a preface that
// carries the transport's version. The port each node advertises to its
// peers serves it, and gRPC beside it for tools and probes (health,
// reflection, and the Forward service itself, for grpcurl): a connection
// chooses by TLS ALPN (ALPN) or, in plaintext, by its first bytes.
//
// The caller's side is a Client: Forward picks one of the peers it is
// given by the power of two choices on the requests it has in flight to
// each (Pick), calls it over a pooled connection with the request's
// deadline, request id, priority and caller identity, and on Unavailable
// tries one other peer, never more. The serving side is a Server, which
// authenticates its peers by their client certificates (mTLS against the
// cluster CA; a member check names who belongs) and runs each request on
// a Local, which the node implements with its model actors. A request
// travels one hop: the Server marks its context (Forwarded) and a Client
// refuses to forward from such a context.
//
// Which peers have a model ready is not this package's business: the
// router gives Forward the list, from the cluster's placement and member
// records.
//
// # Who owns what
//
//	state                          owner                           how others read it
//	-----------------------------  ------------------------------  -------------------------------------
//	connection pool (address ->    Client, under Client.mu          Forward takes a pool entry under mu,
//	  connections, in-flight          (added by Forward, removed       then uses it without the lock; a
//	  counts)                         by Retain and Close)             removed entry's calls end Unavailable
//	a framed connection (slot)     the slot, under slot.mu          a call takes it from slot.get; it is
//	                                  (dialled by one goroutine,       made again after it ends, failing
//	                                  replaced when it ends)           calls at once during a pause
//	a client connection's calls    clientConn, under its mu         whoever reads (a call leading, or
//	  waiting for answers, and        (added by call, removed by       readLoop) hands each answer to its
//	  who reads the connection        the answer, or by the caller     call's channel, or drops it when
//	                                  of a call not written whole)     its caller gave up
//	a connection's writing         its frameWriter: the write       a writer takes the turn for each
//	  (either side)                   turn (a token, first come        frame it writes, and the bulk turn
//	                                  first served) and the bulk       from a chunked message's head to its
//	                                  turn (one chunked message        last data frame; a call's sent flag
//	                                  at a time)                       is read and set in the write turn
//	the chunked message arriving   whoever reads the connection    nobody else: a call gets the whole
//	  (inbound, either side)          (the reader on the server;       message, or nothing if it gave up
//	                                  a lead or readLoop on the
//	                                  client)
//	a server connection's calls    serverConn, under its mu         a cancel frame cancels the call's
//	  in flight (cancel funcs),       (added by the reader, removed    context; the goroutine with a call's
//	  and whether a chunked call      when the call is answered)       answer writes it (a chunked one: a
//	  arrives                                                          goroutine of its own); goaway's quiet
//	                                                                   wait begins when neither is left
//	the server's framed            Server, under Server.mu          GracefulStop tells each goaway, Stop
//	  connections and listeners                                        closes them
//	in-flight count of a peer      the Forward calls to it         an atomic, read by Pick's load
//	Local's models                 the node (the lead's actors)    Local.Predict only
//	membership (Members,           the node's cluster records      funcs the Server calls per call
//	  ConfirmMember)                                                   (ConfirmMember: only for a name
//	                                                                   Members does not know)
package forward
