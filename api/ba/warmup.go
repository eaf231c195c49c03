package ba

import (
	"cmp"
	"fmt"

	"github.com/groveml/grove/servables"
)

// ParseWarmUp parses a model's warm_up_batch_request_json: a batch request
// whose every item targets modelPath. It returns the inputs of each item.
// Unlike the B&A sidecar, which skips items that fail to parse as long as
// one parses, Grove rejects the warm-up if any item is malformed, so a typo
// in the config shows up instead of silently warming up less.
// Numbers follow o, as in requests.
func (o ParseOptions) ParseWarmUp(json, modelPath string) ([][]servables.Tensor, error) {
	req, berr := o.ParseRequest([]byte(json))
	if berr != nil {
		return nil, fmt.Errorf("Encounters warm up batch inference request parsing error: %s", berr.Description)
	}
	if len(req.Items) == 0 {
		return nil, fmt.Errorf("warm up batch inference request has no items")
	}
	sets := make([][]servables.Tensor, len(req.Items))
	for i, it := range req.Items {
		if e := cmp.Or(it.Err, it.InputErr); e != nil {
			return nil, fmt.Errorf("Encounters warm up batch inference request parsing error: item %d: %s", i, e.Description)
		}
		if it.ModelPath != modelPath {
			return nil, fmt.Errorf("Warm up request using different model path: item %d targets %q, the model is %q", i, it.ModelPath, modelPath)
		}
		sets[i] = it.Inputs
	}
	return sets, nil
}
