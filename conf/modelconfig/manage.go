package modelconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// This file holds the management API's side of the model config: the
// settings its documents carry, their canonical JSON (the shapes the
// config file has), and the edits it makes to a Config. api/forestflow
// reads the documents.

// ContractSettings are a contract's own settings: everything but its
// servables, as the management API's POST /contract/{org}/{project}/{n}
// and PUT /{org}/{project}/{n} give them (api/forestflow reads the body).
type ContractSettings struct {
	// Router decides how valid servables share traffic ("" means fair).
	Router Router
	// Expiration retires old or poor releases.
	Expiration Expiration
	// StickyKey pins callers to a servable; empty for none.
	StickyKey string
	// Outcomes is what the contract learns from outcomes; nil for nothing.
	Outcomes *Outcomes
	// Bandit is the settings of a bandit router; nil for none.
	Bandit *Bandit
}

// Settings returns the contract's settings.
func (c Contract) Settings() ContractSettings {
	return ContractSettings{Router: c.Router, Expiration: c.Expiration, StickyKey: c.StickyKey, Outcomes: c.Outcomes, Bandit: c.Bandit}
}

// MarshalJSON writes the settings in the config file's shape.
func (cs ContractSettings) MarshalJSON() ([]byte, error) { return json.Marshal(cs.canonical()) }

// Policy is a servable's routing policy: validity, phase-in, shadowing and
// the rollback gate.
// The management API's PUT /{org}/{project}/{n}/{rv}/policy gives it
// (api/forestflow reads the body).
type Policy struct {
	// Validity are the rules that must all hold for the servable to take traffic.
	Validity []ValidityRule
	// PhaseIn is how its weight rises once valid.
	PhaseIn PhaseIn
	// Shadow, if not nil, makes it receive shadow copies.
	Shadow *Shadow
	// RollbackWhen, if not nil, rolls it back when it fails while phasing in.
	RollbackWhen *RollbackWhen
}

// Policy returns the servable's policy.
func (s ContractServable) Policy() Policy {
	return Policy{Validity: s.Validity, PhaseIn: s.PhaseIn, Shadow: s.Shadow, RollbackWhen: s.RollbackWhen}
}

// MarshalJSON writes the policy in the config file's shape.
func (p Policy) MarshalJSON() ([]byte, error) { return json.Marshal(p.canonical()) }

// MarshalJSON writes the logging settings in the config file's shape.
func (l ServableLogging) MarshalJSON() ([]byte, error) { return json.Marshal(l.canonical()) }

// MarshalJSON writes the servable in the config file's shape.
func (s ContractServable) MarshalJSON() ([]byte, error) { return json.Marshal(canonicalServable(s)) }

// DefaultLogging is a servable's logging when none is given.
func DefaultLogging() ServableLogging {
	return ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}
}

// Errors of the management edits, for the API to map to its answers.
var (
	// ErrContractExists: the contract to create is already configured.
	ErrContractExists = errors.New("contract already exists")
	// ErrContractNotFound: no contract with that id is configured.
	ErrContractNotFound = errors.New("unknown contract")
	// ErrServableExists: the contract already has that release.
	ErrServableExists = errors.New("servable already exists")
	// ErrServableNotFound: the contract has no such release.
	ErrServableNotFound = errors.New("unknown servable")
	// ErrContractSettingsGiven: AddServable was given contract settings for
	// an existing contract, which a serve request may not change.
	ErrContractSettingsGiven = errors.New("cannot override contract settings with a serve request; use PUT /{organization}/{project}/{contract_number}")
)

// contract returns the configured contract with id "org/project/n".
func (c *Config) contract(id string) (*Contract, error) {
	for i := range c.Contracts {
		if c.Contracts[i].ID() == id {
			return &c.Contracts[i], nil
		}
	}
	return nil, fmt.Errorf("%w %s", ErrContractNotFound, id)
}

// servable returns the release rv of contract id.
func (c *Config) servable(id, rv string) (*ContractServable, error) {
	k, err := c.contract(id)
	if err != nil {
		return nil, err
	}
	for i := range k.Servables {
		if k.Servables[i].ReleaseVersion == rv {
			return &k.Servables[i], nil
		}
	}
	return nil, fmt.Errorf("%w %s in contract %s", ErrServableNotFound, rv, id)
}

// CreateContract adds a contract with no servables.
func (c *Config) CreateContract(org, project string, n int, cs ContractSettings) error {
	k := Contract{Organization: org, Project: project, Number: n}
	if _, err := c.contract(k.ID()); err == nil {
		return fmt.Errorf("%w: %s; use PUT /%s to update it", ErrContractExists, k.ID(), k.ID())
	}
	k.Router, k.Expiration, k.StickyKey, k.Outcomes, k.Bandit = cs.Router, cs.Expiration, cs.StickyKey, cs.Outcomes, cs.Bandit
	c.Contracts = append(c.Contracts, k)
	return nil
}

// UpdateContract replaces the settings of contract id.
func (c *Config) UpdateContract(id string, cs ContractSettings) error {
	k, err := c.contract(id)
	if err != nil {
		return err
	}
	k.Router, k.Expiration, k.StickyKey, k.Outcomes, k.Bandit = cs.Router, cs.Expiration, cs.StickyKey, cs.Outcomes, cs.Bandit
	return nil
}

// AddServable adds release s, serving model m, to the contract that k
// names (by its Organization, Project and Number; its other fields are not
// used). It lists m in model_metadata if its path is not there yet, and
// creates the contract if it does not exist, with the settings cs or, if
// cs is nil, the defaults (fair router, no expiration); settings given for
// an existing contract are ErrContractSettingsGiven. The release serves
// m's path, whatever s.ModelPath says.
func (c *Config) AddServable(k Contract, s ContractServable, m Model, cs *ContractSettings) error {
	id := k.ID()
	dst, err := c.contract(id)
	switch {
	case err != nil:
		settings := ContractSettings{Router: RouterFair}
		if cs != nil {
			settings = *cs
		}
		if err := c.CreateContract(k.Organization, k.Project, k.Number, settings); err != nil {
			return err
		}
		dst = &c.Contracts[len(c.Contracts)-1]
	case cs != nil:
		return fmt.Errorf("contract %s: %w", id, ErrContractSettingsGiven)
	}
	if _, err := c.servable(id, s.ReleaseVersion); err == nil {
		return fmt.Errorf("%w: release %s of contract %s", ErrServableExists, s.ReleaseVersion, id)
	}
	if !slices.ContainsFunc(c.Models, func(listed Model) bool { return listed.Path == m.Path }) {
		c.Models = append(c.Models, m)
	}
	s.ModelPath = m.Path
	dst.Servables = append(dst.Servables, s)
	return nil
}

// SetPolicy replaces the policy of release rv of contract id.
func (c *Config) SetPolicy(id, rv string, p Policy) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	s.Validity, s.PhaseIn, s.Shadow, s.RollbackWhen = p.Validity, p.PhaseIn, p.Shadow, p.RollbackWhen
	return nil
}

// SetLogging replaces the logging settings of release rv of contract id.
func (c *Config) SetLogging(id, rv string, l ServableLogging) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	s.Logging = l
	return nil
}

// RemoveServable removes release rv from contract id. Its model leaves
// model_metadata too (and is evicted after its grace period) unless another
// contract's servable uses it; a model that no contract used before stays.
func (c *Config) RemoveServable(id, rv string) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	path := s.ModelPath
	k, _ := c.contract(id)
	k.Servables = slices.DeleteFunc(k.Servables, func(s ContractServable) bool { return s.ReleaseVersion == rv })
	for _, k := range c.Contracts {
		for _, s := range k.Servables {
			if s.ModelPath == path {
				return nil
			}
		}
	}
	c.Models = slices.DeleteFunc(c.Models, func(m Model) bool { return m.Path == path })
	return nil
}

// Validate checks an edited config by the rules of Parse and
// returns it in canonical JSON, the form to write to the bucket.
func (c *Config) Validate() ([]byte, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding model config: %w", err)
	}
	if _, err := Parse(data); err != nil {
		return nil, err
	}
	return data, nil
}
