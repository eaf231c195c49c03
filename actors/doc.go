// Package actors runs Grove's three kinds of actor on protoactor-go:
//
//   - a model actor per loaded model content, which owns a servable and
//     answers predict messages from a priority mailbox (user requests before
//     warm-up and shadow work);
//   - the supervisor, which polls the bucket's model config, reconciles it
//     (fetch, verify checksum, load, warm up, swap in place, evict after a
//     grace period) and restarts a model actor that crashes;
//   - the router, which fans a batch of requests out to model actors and
//     gathers the answers in request order.
//
// System ties them together and is what the API front ends call.
package actors
