package build

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/driftback/driftback/app/hide"

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
// A chart is never given a Secret's value: a template can turn it into
// anything (hex, a slice, a hash, an error, a hook's name), and no search
// for the value finds what it turned it into. Each value read from a
// Secret is given as one of two stand-ins of its type instead; what the
// chart renders differently with the second uses a Secret's value.
type releaseValues struct {
	// merged are the values with the first stand-ins.
	merged map[string]any
	// probe are the values with the second stand-ins; nil when no Secret
	// was read and the release's own values use no Secret's variable.
	probe map[string]any
	// allSecret says the probe could not be made: every object of the
	// release is taken to use a Secret's value.
	allSecret bool
	// hidden are the Secrets' real values, as given and base64-encoded:
	// never given to a chart, they are still redacted from what the
	// cluster shows.
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
// with, each Secret's values replaced by stand-ins; or says why they
// cannot be (a fork's pull request reads none). probeRelease, when not
// nil, is hr with the second stand-ins of the Secret variables its source
// uses (postBuild substituteFrom): its values are the probe's.
func loadReleaseValues(ctx context.Context, access *ChartAccess, hr, probeRelease *unstructured.Unstructured) (*releaseValues, string) {
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	if values == nil {
		values = map[string]any{}
	}
	probeValues := values
	if probeRelease != nil {
		probeValues, _, _ = unstructured.NestedMap(probeRelease.Object, "spec", "values")
		if probeValues == nil {
			probeValues = map[string]any{}
		}
	}
	raw, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	if len(raw) == 0 {
		out := &releaseValues{merged: values}
		if probeRelease != nil {
			out.probe = probeValues
		}
		return out, ""
	}
	var refs []meta.ValuesReference
	if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &refs) != nil {
		return nil, "its valuesFrom cannot be read"
	}
	if access == nil || access.Live == nil {
		return nil, "its values come from ConfigMaps or Secrets in the cluster (valuesFrom), which a fork's pull request does not read"
	}
	out := &releaseValues{fromRefs: true}
	seen := &secretsSeen{Client: access.Live, standIn: 1}
	merged, err := chartutil.ChartValuesFromReferences(ctx, logr.Discard(), seen, hr.GetNamespace(), copyValues(values), refs...)
	if err != nil {
		return nil, "its valuesFrom: " + hide.In(err.Error(), seen.hidden)
	}
	out.merged, out.hidden = merged, seen.hidden
	if seen.read || probeRelease != nil {
		second := &secretsSeen{Client: access.Live, standIn: 2}
		out.probe, err = chartutil.ChartValuesFromReferences(ctx, logr.Discard(), second, hr.GetNamespace(), copyValues(probeValues), refs...)
		out.hidden = append(out.hidden, second.hidden...)
		out.allSecret = err != nil
	}
	return out, ""
}

// copyValues is a deep copy: ChartValuesFromReferences merges into what
// it is given.
func copyValues(v map[string]any) map[string]any { return runtime.DeepCopyJSON(v) }

// secretsSeen is a client that gives every Secret it reads with each
// value replaced by its stand-in (standIn 1 or 2), and notes the real
// values, to be redacted wherever the cluster's own objects show them.
type secretsSeen struct {
	client.Client
	standIn int
	read    bool
	hidden  []string
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
		secret.Data[k] = hide.StandIn(v, s.standIn)
	}
	for k, v := range secret.StringData {
		s.hide(v)
		secret.StringData[k] = string(hide.StandIn([]byte(v), s.standIn))
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
