// Package grovepb is the former import path of package
// github.com/groveml/grove/grovepb, kept for one release so that
// consumers of the prediction log that import it keep building.
//
// Deprecated: import github.com/groveml/grove/grovepb; this package will
// be removed in the release after next.
package grovepb

import "github.com/groveml/grove/grovepb"

// The file descriptors of Grove's schemas.
var (
	File_grove_v1_evaluation_proto       = grovepb.File_grove_v1_evaluation_proto
	File_grove_v1_model_config_proto     = grovepb.File_grove_v1_model_config_proto
	File_grove_v1_outcome_proto          = grovepb.File_grove_v1_outcome_proto
	File_grove_v1_prediction_event_proto = grovepb.File_grove_v1_prediction_event_proto
)

// The messages of Grove's schemas.
type (
	BanditConfig                  = grovepb.BanditConfig
	Contract                      = grovepb.Contract
	ContractServable              = grovepb.ContractServable
	Error                         = grovepb.Error
	Evaluation                    = grovepb.Evaluation
	EvaluationCounters            = grovepb.EvaluationCounters
	Expiration                    = grovepb.Expiration
	Expiration_KeepLatest         = grovepb.Expiration_KeepLatest
	Expiration_KeepTopRanked      = grovepb.Expiration_KeepTopRanked
	KeepTopRanked                 = grovepb.KeepTopRanked
	LinearOverSecs                = grovepb.LinearOverSecs
	MinMetric                     = grovepb.MinMetric
	MinServedEvents               = grovepb.MinServedEvents
	ModelConfig                   = grovepb.ModelConfig
	ModelMetadata                 = grovepb.ModelMetadata
	Outcome                       = grovepb.Outcome
	OutcomeConfig                 = grovepb.OutcomeConfig
	OutputComparison              = grovepb.OutputComparison
	PhaseIn                       = grovepb.PhaseIn
	PhaseIn_Immediate             = grovepb.PhaseIn_Immediate
	PhaseIn_LinearOverSecs        = grovepb.PhaseIn_LinearOverSecs
	PredictionEvent               = grovepb.PredictionEvent
	PromoteWhen                   = grovepb.PromoteWhen
	RollbackWhen                  = grovepb.RollbackWhen
	ServableLogging               = grovepb.ServableLogging
	Shadow                        = grovepb.Shadow
	ShadowComparison              = grovepb.ShadowComparison
	Tensor                        = grovepb.Tensor
	TensorSignature               = grovepb.TensorSignature
	ValidAfterMs                  = grovepb.ValidAfterMs
	ValidityRule                  = grovepb.ValidityRule
	ValidityRule_ImmediatelyValid = grovepb.ValidityRule_ImmediatelyValid
	ValidityRule_MinMetric        = grovepb.ValidityRule_MinMetric
	ValidityRule_MinServedEvents  = grovepb.ValidityRule_MinServedEvents
	ValidityRule_NeverValid       = grovepb.ValidityRule_NeverValid
	ValidityRule_PromoteWhen      = grovepb.ValidityRule_PromoteWhen
	ValidityRule_ValidAfterMs     = grovepb.ValidityRule_ValidAfterMs
	VersionPolicy                 = grovepb.VersionPolicy
	VersionPolicy_All             = grovepb.VersionPolicy_All
	VersionPolicy_All_            = grovepb.VersionPolicy_All_
	VersionPolicy_Latest          = grovepb.VersionPolicy_Latest
	VersionPolicy_Latest_         = grovepb.VersionPolicy_Latest_
	VersionPolicy_Specific        = grovepb.VersionPolicy_Specific
	VersionPolicy_Specific_       = grovepb.VersionPolicy_Specific_
)
