// Package actors runs Grove's three kinds of actor on protoactor-go:
//
//   - a model actor per loaded model content (one per replica), which owns
//     a servable and answers predict messages from a priority mailbox (user
//     requests before warm-up and shadow work);
//   - the supervisor, which polls the bucket's model config, feeds what
//     happens to the lifecycle planner (package lifecycle: fetch, verify,
//     load, warm up, swap, retire, release) and executes its steps, and
//     restarts a model actor that crashes (it is their parent);
//   - the router, which fans a batch of requests out to model actors and
//     gathers the answers in request order, and owns the contracts:
//     routing decisions, shadow copies (compared with the caller's
//     answer by package quality's arithmetic), expiry.
//
// A call of one request with no contract and no shadow copies skips the
// router: its caller's goroutine takes it to its model actor (servesAlone),
// and runs it there when the actor is idle, no other call is in flight
// and its deadline is far enough (serveAlone, modelMailbox.postInline).
//
// System ties them together and is what the API front ends call. On a
// cluster node (docs/cluster.md) the supervisor loads only the node's
// share of the config (System.SetShare), the router forwards a request for
// a model ready only on other nodes (Options.Remote) and compares the
// shadow copies it forwards there with the caller's answer here, such a
// model's metadata and serving are answered from Remote.Model (the other
// node's member record), and System.Predict serves the requests other
// nodes forward here, counted in this node's per-model metrics only.
//
// # Who owns what
//
// Every piece of state has one owner that writes it. Others read it only
// as the last column says; nothing is shared under a lock between actors
// without a line here.
//
//	state                                  owner                       how others read it
//	-------------------------------------  --------------------------  -----------------------------------------------
//	lifecycle.State (phases, jobs, grace   supervisor                  not at all: status and routes are published
//	  times, retiring and kept contents),
//	  loadJob artifacts, registration
//	  sources and waiters, config status,
//	  wake timer, versioned entries
//	  (versions found, listing errors)
//	routing table (path -> content; a      supervisor                  System.routes, an atomic pointer to a table
//	  versioned entry's path -> its                                    replaced, never changed (router, System, metrics)
//	  newest ready version's content)
//	demand table (on-demand path with no   supervisor                  System.demand, an atomic pointer to a table
//	  content -> its demand slot)                                      replaced, never changed (ways.toModel, ModelPaths,
//	                                                                     the router's plan)
//	demand slot: requests parked, load     requests park and ask; the  demandSlot.mu (demand.go); a parked item is
//	  asked, serving, last failure and       supervisor opens, closes    claimed like a model actor's answer
//	  backoff, expected load time            and fails it
//	demandSlot.closedAs (what the last     supervisor                  not at all
//	  close set)
//	content.lastUsed                       sendPredict (on-demand      atomic (the planner's LastUsed, on the
//	                                         contents only)              supervisor)
//	status snapshot                        supervisor, when read after System.status, an atomic pointer, and
//	                                         an event changed it         System.statusStale (System.freshStatus)
//	System.settled                         supervisor                  atomic (System.Ready)
//	disk cache (unloaded on-demand         supervisor                  not at all: System.disk is the supervisor's
//	  models' files, diskcache.go)
//	content: id, path, checksum, runtime,  supervisor, set before the  immutable once published in the routing table
//	  local files, signed, pids, loadedAt    content is published
//	content.meta (its signature)           supervisor at spawn; its    atomic pointer, replaced before the content is
//	                                         warm-up goroutine when     published, then never (System.ModelMetadata,
//	                                         it learns (signature.go)   Servable, a reload after a crash, bind)
//	content.retired                        supervisor, set after a     atomic (router's acquire, content.leave)
//	                                         table without it is out,
//	                                         cleared before a table
//	                                         with it again (a kept
//	                                         content restored)
//	content counters (queued, inflight,    acquire (router, fan-out)   atomics; content.leave tells the supervisor
//	  busy, served, crashes, shadowed,       and model actors (dequeue,  (drainedContent) when a retired one drains
//	  shadowDropped, stats)                  answer)
//	content.okSeries (the metric series    whoever answers a request   atomic pointer to a map replaced, never changed
//	  of its successful requests by API)     (content.observe)
//	servable, dynamic batch, flush gen,    its model actor             not at all (predict messages in, done callbacks
//	  reload error                                                       out)
//	contracts: config in force, valid-     router                      routerQuery messages run on the router
//	  since stamps, rollbacks decided or                                 (System.ContractStats, Contracts, Contract,
//	  cleared, pick sequences, expired                                   ContractPlan, Servable); contractsExpired
//	  paths                                                              messages to the supervisor
//	release counters (served, latency,     the goroutine of System.    atomic and latencyWindow's own mutex (router's
//	  live requests and errors)              Score, after the answer;     plan and stats); the live counters' set is an
//	                                         the router replaces the      atomic pointer
//	                                         live set on a new stamp
//	shared contract state (bucket object)  sharedState: its writer     current state: an atomic pointer (router);
//	                                         goroutine and the          pending writes: sharedState.mu (router asks,
//	                                         management calls           writer takes); publishing order:
//	                                                                    sharedState.pub (supervisor's poll, writes)
//	a bandit router's counts to save       router (banditRouter.save)  atomic pointer, replaced, never changed (the
//	  (banditRouter.saved)                                               state's writer reads it when it writes)
//	batch results                          the model actor answering   each index written once, then the reply
//	                                         each item                   channel (System.run)
//	shadow copy answers                    the goroutines answering    shadowCopy.mu
//	                                         its micro-batches (a
//	                                         forwarded copy: its
//	                                         forward goroutine)
//	shadow copies in flight to other       the router (shadowRemote,   the map and the dropped counts (with the
//	  nodes and dropped, by challenger       forgetRemoteShadows) and    remote content they count for): the router's
//	  path (remoteShadows)                   the copy's forward          alone (stats reads them there); in flight:
//	                                         goroutine (leave)           an atomic
//	champion answer to compare with        the champion's done         championAnswer.mu (the shadow copies that
//	  (championAnswer)                       callback (stores only)      compare with it; shadow.go)
//	comparison windows (compareWindows,    the router makes them; the  compareWindows.mu (ContractStats and the
//	  windows.go: a quality.Windows and      shadow copies' compare      metrics collector, off the router); the gate's
//	  the gate's Comparison)                 (low-priority workers)      Comparison: compareWindows.gmu (router's plan,
//	                                                                     which never waits for mu)
//	outcome figures (Options.Outcomes)     its source, outside the     the source's reads, safe for concurrent use
//	                                         engine (the evaluations     (router's plan and stats); the figures it
//	                                         topic's follower)           returns are shared, never modified
//	System.draining, closing               System's callers            atomics
//	cluster share (paths this node loads)  supervisor (setShare from   not at all: it filters the config in force
//	  and the config in force before it      System.SetShare)            before the planner sees it (cluster.go)
//	config in force (System.applied)       supervisor, on a config     atomic pointer to a value replaced, never
//	                                         that differs                changed, whose channel closes on the next
//	                                                                     (System.AppliedConfig; the node agent)
//	a model actor's run (modelMailbox.     the holder of its running   not at all: a message posted meanwhile
//	  running: the one goroutine that        flag: a dispatcher worker,  queues, and the holder's run (the
//	  invokes the actor)                     or a caller's goroutine     dispatcher's after an inline one) takes it
//	                                         running its own request
//	forwarded batch items                  the goroutine of the        claimed like a model actor's answer (the
//	                                         forward call (router.       batch's state[i]); a call of one plain
//	                                         forward, System.background) request is forwarded, and its result
//	                                                                     written, by its caller's goroutine
//	                                                                     (System.forwardAlone), never the router;
//	                                                                     both forward through ways.toNode
//
// # A panic in the supervisor or the router
//
// A model actor that panics is restarted by its parent, the supervisor
// (restartAlways), and reloads its servable from the local cache. A
// reload that fails, or panics (modelActor.reload recovers it, counted in
// grove_actor_panics_total{actor="reload"}), leaves the actor answering
// Unavailable and the supervisor loading the model afresh: a panic there
// never crashes the actor's start, which would be restarted at once, and
// panic again, without end. The supervisor and the router, whose parent
// is the root, are never restarted: a restart of the supervisor would
// stop every model actor first and wait for all of them, a warm-up stuck
// in a runtime's call forever included, then start from nothing; one of
// the router would lose its contracts. Each recovers the panics of its
// own Receive instead (panics.go), logs them at error level with the
// message's type and the stack, counts them in grove_actor_panics_total,
// and goes on with its state (the planner's, stuck warm-ups included) and
// its children; a panic its recovery lets through resumes it just the
// same (resumeOnPanic, their guardian strategy).
//
// What a panic costs is the message being handled, and its caller gets
// an answer at once, never a hang: a batch's items not answered yet, a
// Score call, a router query, a reload (System.Reload), a registration
// or a deletion the planner did not take get an internal error (kind
// Unavailable: retry), a status read the last snapshot. A deletion the
// planner took is answered done, and a registration it took its outcome
// (the model ready, or why not), as without the panic; a config edit
// (System.EditConfig) whose reload panicked is answered written, as it
// is: the config is in the bucket and the next poll applies it. What the
// handler left undone converges without it:
//
//   - the supervisor's next event plans and publishes again (routing and
//     demand tables, status, wake-up time), and every config poll applies
//     the whole config again (a change made meanwhile included), and gives
//     the router its contracts again;
//   - a step of a plan is taken under a recovery of its own
//     (supervisorActor.take): a panic costs that step only, and a fetch,
//     load or warm-up step, whose background stage starts last and so did
//     not start, ends its job failed with the panic, as a failed stage
//     does: the model is retried at the next poll (on demand: at a request
//     after its backoff) and the requests parked for its load are answered
//     (a warm-up's model actors spawned before the panic stop with the
//     job's content, which took the servable before the first was
//     spawned, and the servable is closed once they have);
//     a swap that left its content out of the supervisor's hands loads the
//     path afresh; a discard, a release or a job's drop does what it
//     changes first and reports (logs, metrics) last, so a panic in the
//     report costs the report only (the requests parked for a failed
//     on-demand load are answered, the content's model actors stop, a
//     dropped job's servable is closed, its files removed and its memory
//     no longer counted);
//   - a request, or a shadow copy's micro-batch, that the router was
//     sending to its model when it panicked gives back the place it took
//     in the model's queue (sendPredict, routerActor.shadow): the content
//     still drains, and is released once replaced; a shadow copy it was
//     sending to another node gives back its place among the challenger's
//     copies in flight (routerActor.shadowRemote);
//   - a demand load whose handling panicked before the planner started
//     the load answers the requests parked for it, and the next request
//     asks again;
//   - a message that comes once and that the planner waits for is not
//     lost: a stage's result whose handling panicked before the planner
//     took it is sent again as a failure (the job ends failed, what the
//     stage made is freed, and the model is retried as after any failed
//     stage), and a content's end (freedContent) is still told to the
//     planner, which would otherwise count its memory, and hold back the
//     loads of a stuck warm-up's content, for good.
//
// What it may leave: a content or files not freed until Stop (a release
// or a discard cut short), and, for a bug that panics on every message of
// a kind, that kind's work not done (logged and counted each time) while
// everything else, serving first, goes on.
//
// # A panic in a background job
//
// The supervisor's stages run on goroutines of their own, outside any
// actor: a panic there would end the process. Each recovers its own:
// a model's fetch (supervisorActor.fetchFiles), which runs the bucket
// client's code and Grove's, logs it at error level with its stack,
// counts it in grove_actor_panics_total{actor="fetch"}, and fails as a
// fetch that fails does: its job ends failed, the model is retried (on
// demand: the requests parked for it get the error), and no file of it
// is left (those taken from the disk cache are deleted, and bucket.Fetch
// deletes what it wrote); a config poll (supervisorActor.readConfig),
// counted as actor="config_poll", fails as a config that could not be
// read: the config in force stays, the reloads waiting for it get the
// internal error at once (a config edit is still answered written), and
// the next poll runs as usual. A runtime that panics loading a model
// fails that load (System.load), and so does, counted as actor="load",
// a panic in the load's own code around it (supervisorActor.loadFiles:
// the declared signature, the memory measure), which closes the
// servable loaded (System.load closes one it does not return) and counts
// no memory for it. A warm-up whose own code panics (System.warmUp; its
// forward calls run in model actors, which are restarted) or the code
// that makes its result (supervisorActor.warmUpContent), counted as
// actor="warm_up", fails its load as a failed warm-up does: the job's
// content is released, its model actors stop and close the servable,
// and its memory no longer counts. The removal of a released content's
// files (supervisorActor.removeFiles), counted as actor="release",
// removes them all before it logs what failed: a panic in a log leaves
// none on disk, and the content's memory was freed before it began. A
// servable whose Close panics as the supervisor closes it
// (supervisorActor.closeModel: a dropped job's, or every one left as it
// stops, freeAll), counted as actor="close", fails that close alone: its
// files are removed all the same, and so is the rest.
//
// The router's forwards to other cluster nodes run on goroutines of
// their own too, each recovering its own, counted as actor="forward": a
// forwarded request (routerActor.forwardItem) is answered with the
// internal error at once unless it was answered already, and a shadow
// copy (routerActor.sendShadow) that had not ended ends as a copy no
// node took (logged, not compared) and gives back its place among the
// challenger's copies in flight; either counts as a failed forward.
//
// A shadow copy is compared with the caller's answer and handed to the
// prediction sink on the low-priority workers, on the goroutine a full
// queue spills its log entry to, or on whichever goroutine ended it,
// none of which recovers a job's panic. Each recovers its own: a panic
// in the comparison (shadowCopy.compare), counted as
// actor="shadow_compare" and as a comparison shed, drops that comparison
// and the copy is logged uncompared; one in the sink (shadowCopy.log),
// counted as actor="shadow_log", drops that entry. The worker goes on.
//
// The answer to a request another node forwarded here by the framed
// transport (System.PredictAsync) is handed to the transport's done on
// whichever goroutine has it: a model actor's, a timer's
// (default_timeout_ms, an on-demand load's wait), or a context's
// callback. A panic in done (System.answerForwarded), or in Grove's code
// that makes the answer before done is called (System.recoverForwarded),
// counted as actor="forward_reply", costs that answer alone: a request
// not answered yet gets the internal error, and done is never called
// twice. No model actor is restarted for it.
//
// A model's default_timeout_ms answers a request its model has not
// answered in time on a timer's goroutine, which recovers nothing: a
// panic in that code (sendPredict's timer), counted as
// actor="default_timeout", answers the request with the internal error
// instead (batch.failItem). Its run still gives its queue place back.
// So does a panic answering a request parked for its on-demand model's
// load at its deadline (batch.expireParked, on its timer), counted as
// actor="load_wait"; the request is not run when the load ends.
//
// # The layers around it
//
// actors sits above cluster/, logging/ and routing/ (docs/architecture.md)
// and imports them; nothing of those layers imports actors. Two pieces
// that join the engine to them are the engine's own:
//
//   - PredictionLog, the PredictionSink that turns the engine's own
//     Request and Result into prediction events for logging's Kafka
//     producer: no answer is copied into another type before it is
//     logged, and logging knows nothing of the engine.
//   - actors/node: the node agent drives a System (SetShare, ModelInfo,
//     AppliedConfig) from the cluster's placement table, as cmd/grove
//     does from flags. The engine sees the rest of the cluster only
//     through its own Remote interface, which the node agent implements
//     (with cluster/forward's Client) and cmd/grove passes in Options.
//
// The arithmetic of comparisons, latencies and outcomes that the engine
// keeps (routing/quality) imports nothing of it, so that the prediction
// log and the evaluator may use the same figures; actors/lifecycle, the
// supervisor's planner, stays in the engine's layer.
//
// # The goroutines it starts
//
// Background work (config polls, fetches, loads, warm-ups, releases, the
// shared-state writer, the calls forwarded to other nodes) runs on
// goroutines started by System.background, which System.Stop cancels and
// waits for; each ends by sending its result to the supervisor, which
// stops taking steps (quiesce) and frees what late results bring before it
// stops. Every other goroutine the engine starts has an owner that Stop
// stops and waits for: a model actor its flush timers (a dynamic batch's
// max_queue_delay), when it stops (modelActor.close); the low-priority
// workers the shadow work they run and the log events they spill when
// busy (lowPriority.spill), after the background jobs have ended, since
// a forwarded call's answer may hand them work; the mailboxes' workers
// (workerDispatcher), last. If Stop's context ends first, the shutdown
// finishes on a goroutine of its own. A load's runtime call and its
// warm-up's forward calls each run on a goroutine of their own, locked to
// an OS thread at a lower CPU priority (System.lowered, internal/lowprio),
// which the caller (the load's background job, the model actor) waits for.
//
// Not tracked, because tracking them would cost every request, and none
// blocks: the timer of a request's deadline (sendPredict's
// default_timeout_ms), which answers a request whose model has not, and
// PredictAsync's context.AfterFunc callbacks, which hand the caller its
// answer when its context ends or the actors stop. After Stop they answer
// only callers already answered (ErrStopped), or call back into the
// caller's own done. The router's expiry tick and the supervisor's
// wake-up timer only send their actor a message; the router stops its
// tick when it stops, the supervisor its timer when it quiesces. Two
// context.AfterFunc callbacks live only as long as the call that
// registers them, which unregisters them when it returns: a batch's
// joined context (joinContexts, done once every request in it has gone;
// it registers them only when the runtime asks for its Done channel) and
// a forwarded call's cancel on Stop (ways.toNode).
package actors
