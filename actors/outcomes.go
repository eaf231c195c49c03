package actors

import (
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// OutcomeSource gives the outcome figures the evaluator published (`grove
// evaluate`, read back from its topic: logging/outcome/evaluations'
// Table is one) for one series of a contract: a release's served
// predictions, or its shadow predictions. It must be safe for concurrent
// use and cheap: the router asks at every evaluation of a contract.
type OutcomeSource interface {
	// Outcomes returns the series' input of the outcome rules (nil: none,
	// or not of a binary rule) and its stats' outcomes object (nil: none).
	// For a served series, champion names the contract's champion: its
	// vs_champion compares the two (none when the series is the
	// champion's). The caller does not modify what it gets.
	Outcomes(contract, release string, shadow bool, champion string) (*routing.OutcomeStats, *quality.OutcomeStats)
}

// judgedInShadow reports whether the outcome figures of servable sv,
// whose stamp is validSince (zero: not valid), are those of its shadow
// predictions: while it is a challenger not valid yet that gets shadow
// copies, promote_when judges it on them against the champion's on the
// same requests. Once valid it serves, and rollback_when, min_metric and
// keep_top_ranked judge what it served.
func judgedInShadow(sv *modelconfig.ContractServable, validSince time.Time) bool {
	return sv.Shadow != nil && validSince.IsZero()
}

// champion is the contract's champion in plan p, for the stats' Welch
// comparisons: the valid, unexpired servable valid the longest (the
// first in contract order among equals); "" when none is valid.
func champion(p routing.Plan) string {
	var best string
	var since time.Time
	for _, s := range p.Servables {
		if s.Valid && !s.Expired && (best == "" || s.ValidSince.Before(since)) {
			best, since = s.Release, s.ValidSince
		}
	}
	return best
}
