package build

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// releaseValues are a HelmRelease's values as helm-controller merges
// them: its valuesFrom ConfigMaps and Secrets in order, then its values.
type releaseValues struct {
	merged map[string]any
	// probe is merged with every value read from a Secret changed: what
	// the chart renders differently with it uses a Secret's value. nil
	// when no Secret was read.
	probe map[string]any
	// allSecret says the probe could not be made: every object of the
	// release is taken to use a Secret's value.
	allSecret bool
	// hidden are the Secrets' values, as given and base64-encoded.
	hidden []string
	// fromRefs says valuesFrom gave values: drift is not traced to the
	// HelmRelease's own values then.
	fromRefs bool
}

// minHidden is the shortest Secret value searched for in what is shown;
// shorter ones would blank unrelated text. Objects the chart renders from
// a Secret's value are hidden whole whatever its length.
const minHidden = 4

// loadReleaseValues merges hr's values, reading its valuesFrom through
// the cluster with the read-only rights postBuild variables are read
// with; or says why they cannot be (a fork's pull request reads none).
func loadReleaseValues(ctx context.Context, access *ChartAccess, hr *unstructured.Unstructured) (*releaseValues, string) {
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	if values == nil {
		values = map[string]any{}
	}
	raw, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	if len(raw) == 0 {
		return &releaseValues{merged: values}, ""
	}
	var refs []meta.ValuesReference
	if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &refs) != nil {
		return nil, "its valuesFrom cannot be read"
	}
	if access == nil || access.Live == nil {
		return nil, "its values come from ConfigMaps or Secrets in the cluster (valuesFrom), which a fork's pull request does not read"
	}
	out := &releaseValues{fromRefs: true}
	seen := &secretsSeen{Client: access.Live}
	merged, err := chartutil.ChartValuesFromReferences(ctx, logr.Discard(), seen, hr.GetNamespace(), copyValues(values), refs...)
	if err != nil {
		return nil, "its valuesFrom: " + HideIn(err.Error(), seen.hidden)
	}
	out.merged, out.hidden = merged, seen.hidden
	if seen.read {
		out.probe, err = chartutil.ChartValuesFromReferences(ctx, logr.Discard(), &secretsSeen{Client: access.Live, change: true}, hr.GetNamespace(), copyValues(values), refs...)
		out.allSecret = err != nil
	}
	return out, ""
}

// copyValues is a deep copy: ChartValuesFromReferences merges into what
// it is given.
func copyValues(v map[string]any) map[string]any { return runtime.DeepCopyJSON(v) }

// secretsSeen is a client that notes the Secrets it reads: their values
// are hidden; with change, it gives every value changed, for the probe.
type secretsSeen struct {
	client.Client
	change bool
	read   bool
	hidden []string
}

func (s *secretsSeen) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	s.read = true
	for k, v := range secret.Data {
		s.hide(string(v))
		var doc any
		if yaml.Unmarshal(v, &doc) == nil {
			walkLeaves(doc, s.hide)
		}
		if s.change {
			secret.Data[k] = changed(v)
		}
	}
	return nil
}

// hide notes a Secret's value, and its base64 encodings.
func (s *secretsSeen) hide(v string) {
	if len(v) < minHidden {
		return
	}
	s.hidden = append(s.hidden, v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)))
}

// walkLeaves calls f with every scalar of v, as text.
func walkLeaves(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			walkLeaves(e, f)
		}
	case []any:
		for _, e := range x {
			walkLeaves(e, f)
		}
	case string:
		f(x)
	case nil:
	default:
		f(fmt.Sprint(x))
	}
}

// changed is a Secret's value with every scalar changed, keeping its
// shape: a values document stays one, a single value stays of its type.
func changed(v []byte) []byte {
	var doc any
	if err := yaml.Unmarshal(v, &doc); err == nil {
		if m, ok := doc.(map[string]any); ok {
			if b, err := yaml.Marshal(changeLeaves(m)); err == nil {
				return b
			}
		}
	}
	if n, err := strconv.ParseFloat(string(v), 64); err == nil {
		return []byte(strconv.FormatFloat(n+1, 'f', -1, 64))
	}
	return append(append([]byte{}, v...), "-changed"...)
}

func changeLeaves(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = changeLeaves(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = changeLeaves(e)
		}
		return x
	case string:
		return x + "-changed"
	case float64:
		return x + 1
	case int64:
		return x + 1
	case bool:
		return !x
	}
	return v
}
