// Package quality is the arithmetic of how well a servable answers, as
// the engine measures it (package actors):
//
//   - how a shadow challenger's answers compare with the champion's, the
//     ones callers got for the same requests: the differences of each
//     output within a tolerance (DiffOutputs), added up over three
//     windows (since the challenger's content loaded, its last N
//     executions, the last 5 minutes: Windows), described for the stats
//     API (ComparisonStats) and for the routing policy's promote_when
//     rule (Windows.Gate, Windows.RecentP99Ratio);
//   - how long answers take: latency histograms whose buckets are 5 %
//     wide, over the last one to two minutes (LatencyWindow), and their
//     quantiles;
//   - how right answers are, once their outcomes are known (a click, a
//     conversion, a value: the evaluator joins them to the predictions):
//     binary outcomes (Binary: count, positives, mean prediction,
//     observed rate, calibration, ECE with its 10 bins, log loss, Brier,
//     AUC to within a bound it reports), numeric ones (Numeric: MAE,
//     RMSE, bias), a shadow challenger against the champion on the same
//     requests (Paired: the log-loss difference with its interval, the
//     AUC difference) or a phased-in release against it on other
//     requests (Welch), over two windows of event time (OutcomeWindows:
//     since the release became valid, the last hour in minute buckets),
//     described for the contract's stats (OutcomeStats: undefined figures
//     are null, never NaN). Every state merges (Merge: a contract's
//     partitions add up to one accumulator over all of them, the counts
//     exactly) and has a versioned binary form (MarshalBinary), which the
//     evaluator checkpoints with its offsets and publishes.
//
// It is data and arithmetic only, in bounded memory: no actor, no
// goroutine, no lock, no clock (the caller passes the time, the event
// time for outcomes). Its types
// are not safe for concurrent use: package actors keeps each behind the
// lock its ownership table names (actors/doc.go) and decides which
// goroutine feeds and reads it; that is the engine's part, this the
// measure's. The name says what it measures, the quality of a servable's
// answers (how close, how fast, how right), not where it runs: it sits beside
// actors/lifecycle, the supervisor's pure planner, as the engine's other
// pure part.
//
// It imports nothing of the engine. internal/layers places it one layer
// below, with routing, whose Comparison it fills: the prediction log
// (package logging), which takes the engine's Result, can then name the
// figures a compared shadow execution's Result carries (OutputDiff).
package quality
