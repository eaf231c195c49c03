// Package join joins outcomes (grove.v1.Outcome) to the predictions that
// preceded them (grove.v1.PredictionEvent) and scores each prediction's
// quality, for one partition of the prediction log and outcome topic: it
// is deterministic and in-process, fed decoded records by its owner (the
// evaluator's consumer, which owns the offsets) with a clock time, and
// holds no goroutine.
//
// # Inputs
//
// A Joiner takes predictions (AddPrediction: an event and its record
// key) and outcomes (AddOutcome) in any interleaving (an
// outcome may come before its prediction), and Advance(now) from the
// owner's clock. Each row of an event's scored output (the rule's output,
// the first one when it names none; one value per row, or two, of which
// the second is the positive class's) is one prediction, joined by
// (request_id, item, row): the event's request_id and item (its place in
// its batch request) and the row. Rules (one per contract and per model entry
// with an outcomes object, modelconfig.Outcomes) say what is learnt;
// predictions of others are counted as unconfigured.
//
// # The rules
//
//   - Event time: a prediction's event time is its event's
//     request_timestamp (when Grove took its request in, which the
//     request's shadow copies carry too; an event without one: its
//     timestamp), and its window is [event time, + window]; the served
//     prediction's window is also its shadows' (the earliest prediction's
//     until the served one comes), so that a shadow is scored on exactly
//     the outcomes the champion is, however long it waited to run. Its
//     figures count at its timestamp, when it was made (since_valid,
//     last_1h): a served prediction was made by a valid release, even
//     one whose request came just before the release's valid_since. Each
//     contract scoring a row (or model entry, for its direct calls) has
//     its own window and champion.
//   - Watermark: the largest time seen (predictions' timestamps,
//     outcomes' event times) less the lateness, never decreasing; a time
//     ahead of the owner's clock counts as the clock's, so that one
//     caller's clock running ahead cannot close every window early. The
//     partition's lateness is the largest of its rules' (a contract with
//     less waits as long as the others). Once the partition has been idle
//     (no input) for the lateness, the watermark moves on with the clock.
//     An owner that reads outcomes later than predictions bounds the
//     watermark by the time up to which it has given the Joiner every
//     outcome (Bound): it stays at most that frontier less the lateness.
//   - A window closes when the watermark reaches its end; its predictions
//     are then scored. binary: 1 when an outcome of the rule's label with
//     a value > 0 fell in the window, else 0; numeric: the sum of the
//     label's values in the window (the outcomes are deduplicated, so the
//     sum is the total of distinct outcomes, e.g. a session's purchases,
//     and does not depend on their order). With no outcome of the label in
//     the window: missing negative scores 0, missing ignore drops the
//     prediction (Counters.Dropped).
//   - An outcome names its prediction by request_id, item and row (every
//     prediction of that row: served and shadow), or by key, the
//     prediction log's record key: the newest prediction logged under it
//     whose own window holds the outcome's time and whose rule's label
//     the outcome has (one that comes before any such prediction goes to
//     the first that comes). model_path and contract narrow the match.
//   - Late: an outcome that comes after the window it falls in has
//     closed (unless a rule of one of its labels with a longer window
//     may still log a prediction of the row: then it waits for it), or
//     whose time is after every window the row it names (by
//     request_id, also when it came before them) can have: its windows,
//     or while a rule with a longer window may still log a prediction of
//     the row, the row's start plus the longest window (then counted at
//     its expiry if none came); or behind the watermark by the longest
//     window; not used.
//     Unmatched: an outcome no prediction used by the time the watermark
//     passed its time by the longest window. Late predictions: those whose
//     window had closed when they came; not scored.
//   - Duplicates (the log is at least once): an outcome_id seen within
//     the longest window, or an event_id seen while its row's window is
//     open or for the longest window after (later, a copy is a late
//     prediction anyway), is counted and left out.
//   - Shadows: each shadow prediction of a binary rule scored with the same
//     outcome as its row's served prediction is paired with it
//     (quality.Paired), for vs_champion.
//
// # Results
//
// Per series (contract, release, served or shadow; for a model's direct
// calls the model path as the release) the quality accumulators in their
// windows (quality.OutcomeWindows: since_valid, from the release's
// valid_since when Options.ValidSince knows it, else every prediction
// scored, but for a release no longer valid, which keeps its last
// valid_since; last_1h), and Counters. Snapshot returns them for publishing,
// with their binary forms for merging with the other partitions'.
//
// # State, and who owns it
//
// The Store holds everything that waits for the watermark: per join key
// the open predictions, the outcomes received and the span of the windows
// already scored (to tell a late outcome) and their event_ids (to tell a
// copy); per record key the join keys logged under it and the key
// outcomes waiting for one (a request logged under its own request_id, as
// with prediction_log.key_by request_id, is its key's only join key until
// another comes: its group holds that, and the record key has an entry
// only for outcomes waiting, so a single-row request has none; a request
// of several rows or items has one, for its other join keys); the
// outcome_ids seen. Each entry has a due
// time in event time, and entries due at the watermark are looked at
// again (scored, expired, deleted), so the store holds about two windows
// of the partition's traffic, bounded by disk with PebbleStore. The Joiner
// itself holds the watermark, the counters and the accumulators, which
// Checkpoint encodes and Restore reads back: the owner syncs the store
// and keeps the checkpoint with the offsets it consumed, so that a
// restart continues where the checkpoint was taken. The Joiner owns its
// store's contents; neither is safe for concurrent use.
package join
