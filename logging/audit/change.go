package audit

import (
	"encoding/json"

	"github.com/groveml/grove/conf/modelconfig"
)

// Sections of an entry's before and after.
const (
	// SectionModelConfig holds the model config entries a write changed.
	SectionModelConfig = "model_config"
	// SectionContractState holds a release's shared record.
	SectionContractState = "contract_state"
	// SectionRegisteredModel holds a registered model (a Model).
	SectionRegisteredModel = "registered_model"
)

// ConfigChange notes the change of the model config from before to after
// (nil: absent) under SectionModelConfig: only the model_metadata entries
// (by model path) and the contracts (by id) that differ, in the config's
// canonical JSON form, so a policy change shows its contract before and
// after, and a new servable its contract and model.
func (w *Write) ConfigChange(before, after *modelconfig.Config) {
	if w == nil {
		return
	}
	b, a := configDiff(before, after)
	w.Change(SectionModelConfig, b, a)
}

// configDiff returns the parts of before and after that differ: nil for a
// side with none of them.
func configDiff(before, after *modelconfig.Config) (b, a any) {
	if before == nil {
		before = &modelconfig.Config{}
	}
	if after == nil {
		after = &modelconfig.Config{}
	}
	models := func(c *modelconfig.Config) map[string]string {
		out := map[string]string{}
		for _, m := range c.Models {
			out[m.Path] = canonical(modelconfig.Config{Models: []modelconfig.Model{m}})
		}
		return out
	}
	contracts := func(c *modelconfig.Config) map[string]string {
		out := map[string]string{}
		for _, k := range c.Contracts {
			out[k.ID()] = canonical(modelconfig.Config{Contracts: []modelconfig.Contract{k}})
		}
		return out
	}
	mb, ma, kb, ka := models(before), models(after), contracts(before), contracts(after)
	var db, da modelconfig.Config
	for _, m := range before.Models {
		if mb[m.Path] != ma[m.Path] {
			db.Models = append(db.Models, m)
		}
	}
	for _, m := range after.Models {
		if mb[m.Path] != ma[m.Path] {
			da.Models = append(da.Models, m)
		}
	}
	for _, k := range before.Contracts {
		if kb[k.ID()] != ka[k.ID()] {
			db.Contracts = append(db.Contracts, k)
		}
	}
	for _, k := range after.Contracts {
		if kb[k.ID()] != ka[k.ID()] {
			da.Contracts = append(da.Contracts, k)
		}
	}
	return nonEmpty(db), nonEmpty(da)
}

// canonical is c's canonical JSON.
func canonical(c modelconfig.Config) string {
	data, err := c.MarshalJSON()
	if err != nil {
		return "unmarshallable: " + err.Error()
	}
	return string(data)
}

// nonEmpty returns c as a JSON value, or nil when it has no entries.
func nonEmpty(c modelconfig.Config) any {
	if len(c.Models) == 0 && len(c.Contracts) == 0 {
		return nil
	}
	return json.RawMessage(canonical(c))
}

// StateChange notes the change of release rv of contract id's shared
// record from before to after (nil or zero: none) under
// SectionContractState, in the contract state's JSON form.
func (w *Write) StateChange(id, rv string, before, after *modelconfig.ServableRecord) {
	if w == nil {
		return
	}
	w.Change(SectionContractState, stateOf(id, rv, before), stateOf(id, rv, after))
}

// stateOf is the contract state holding only r, or nil.
func stateOf(id, rv string, r *modelconfig.ServableRecord) any {
	if r == nil || (r.Created.IsZero() && r.ValidSince.IsZero() && len(r.Metrics) == 0) {
		return nil
	}
	st := &modelconfig.ContractState{Contracts: map[string]map[string]modelconfig.ServableRecord{id: {rv: *r}}}
	return st
}
