// Package xgboost serves XGBoost models in pure Go: it reads the JSON
// model format Booster.save_model writes since XGBoost 1.6 (checked
// against Debian's python3-xgboost 1.7.4) and evaluates the trees itself,
// without cgo or the XGBoost library.
//
// # What it reads
//
// A learner with a gbtree or dart booster (dart's weight_drop scales each
// tree), its learner_model_param (base_score, num_feature, num_class), its
// objective's name, its trees (split_indices, split_conditions,
// default_left, left_children, right_children, tree_info) and its
// feature_names. Every tree runs, as Booster.predict runs them;
// best_iteration is reported in the metadata, not applied.
//
// The objectives: reg:squarederror, binary:logitraw and rank:pairwise
// (the margin as it is), reg:logistic and binary:logistic (the sigmoid;
// base_score is a probability), count:poisson (exp; base_score is a
// mean), multi:softprob (the softmax over the classes' margins) and
// multi:softmax (the index of the largest margin, as a float).
//
// Refused with an error naming what: another objective, another booster
// (gblinear), categorical splits, multi-target models, the UBJSON format
// (model.ubj) and XGBoost's legacy binary format. Every array is checked
// when the model loads (lengths agree, child indices in range, every node
// the child of at most one other, feature indices below num_feature), so
// a bad file fails the load: evaluation never indexes out of range and
// never loops.
//
// # Evaluation
//
// The trees are flattened into one slice of 12-byte nodes (threshold,
// feature with the missing value's direction in its top bit, left child),
// each tree breadth first with each node's children adjacent; a leaf
// holds its value and points at itself. A request's rows are copied a
// block at a time (up to 64) with a NaN after each row's features, the
// slot a leaf reads, so that a leaf keeps every row where it is: each row
// then takes exactly as many steps as its tree is deep, each step
// without a branch (right when the value is not below the threshold, or
// is missing and the split sends missing values right). Eight rows walk
// each tree in lockstep, so that their loads overlap; a request of fewer
// than eight rows (or the rest of a block) walks eight trees at a time
// instead. Each row sums its leaves in float32 in the trees' order, as
// XGBoost's CPU predictor does. A NaN input is a missing value. Inputs
// are converted to float32 as XGBoost's DMatrix does. Evaluation
// allocates nothing: the blocks' copies come from a pool.
//
// With intra_op_threads above 1, a request with enough rows (enough node
// steps: parallelMinSteps) is cut into chunks of rows that its own
// goroutine and the model's idle helper goroutines (a fixed pool,
// intra_op_threads-1 of them) take in turn; every row is computed as on
// one thread, so the answer is the same.
package xgboost
