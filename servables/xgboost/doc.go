// Package xgboost serves XGBoost models in pure Go: it reads the JSON and
// UBJSON model formats Booster.save_model writes since XGBoost 1.6
// (checked against Debian's python3-xgboost 1.7.4) and evaluates the
// trees itself, without cgo or the XGBoost library.
//
// # What it reads
//
// A model.json or a model.ubj, told apart by content (Detect): a JSON or
// UBJSON object whose first key is "learner". Both fill the same types,
// encoding/json the one, decodeUBJSON (strict, bounded: every count and
// length checked against the bytes left before anything is allocated,
// nesting limited) the other, and one builder checks and flattens them,
// so a UBJSON file reads to the very forest its JSON twin does.
//
// From the learner: a gbtree or dart booster (dart's weight_drop scales
// each tree), its learner_model_param (base_score, num_feature,
// num_class), its objective's name, its trees (split_indices,
// split_conditions, default_left, left_children, right_children,
// tree_info, and for categorical splits split_type, categories_nodes,
// categories_segments, categories_sizes and categories), its
// feature_names and feature_types. Every tree runs, as Booster.predict
// runs them; best_iteration is reported in the metadata, not applied.
//
// The objectives: reg:squarederror, binary:logitraw and rank:pairwise
// (the margin as it is), reg:logistic and binary:logistic (the sigmoid;
// base_score is a probability), count:poisson (exp; base_score is a
// mean), multi:softprob (the softmax over the classes' margins) and
// multi:softmax (the index of the largest margin, as a float).
//
// Refused with an error naming what (ErrUnsupported): another objective,
// another booster (gblinear), multi-target models, vector leaves, UBJSON
// typed containers of anything but numbers and XGBoost's legacy binary
// format. Every array is checked when the model loads (lengths agree,
// child indices in range, every node the child of at most one other,
// feature indices below num_feature, categorical tables that agree with
// each other and the tree), so a bad file fails the load (ErrInvalid):
// evaluation never indexes out of range and never loops.
//
// # Evaluation
//
// The trees are flattened into one slice of 12-byte nodes (threshold,
// feature with the missing value's direction in its top bit, left child),
// each tree breadth first with each node's children adjacent; a leaf
// holds its value and points at itself. A request's rows are copied a
// block at a time (up to 64), converted to float32 as XGBoost's DMatrix
// does, with a NaN after each row's features, the slot a leaf reads. A
// NaN input is a missing value: it takes the split's default direction;
// so is a value equal to the model entry's missing_value
// (LoadOptions.MissingValue), as with XGBoost's DMatrix(missing=...),
// which the copy makes NaN.
//
// On a forest of numeric splits, a leaf keeps every row where it is, so
// each row takes exactly as many steps as its tree is deep, each step
// without a branch (right when the value is not below the threshold, or
// is missing and the split sends missing values right). Eight rows walk
// each tree in lockstep, so that their loads overlap; a request of fewer
// than eight rows (or the rest of a block) walks eight trees at a time
// instead. Each row sums its leaves in float32 in the trees' order, as
// XGBoost's CPU predictor does. Evaluation allocates nothing: the blocks'
// copies come from a pool.
//
// A forest with categorical splits is evaluated by a function of its own
// (categoricalBlock, on the same blocks), with each categorical split's
// set of categories in a bitset beside the nodes; the numeric forests'
// walks do not test for them. A categorical feature's input is its
// category's code (pandas' cat.codes): the split sends a value right when
// it truncates to one of the split's categories, left when it is any
// other value (an unseen, negative or huge one), and a missing value its
// default way, as XGBoost 1.7 does.
//
// With intra_op_threads above 1, a request with enough rows (enough node
// steps: parallelMinSteps) is cut into chunks of rows that its own
// goroutine and the model's idle helper goroutines (a fixed pool,
// intra_op_threads-1 of them) take in turn; every row is computed as on
// one thread, so the answer is the same.
package xgboost
