package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile/hide"
	"github.com/driftback/driftback/render/helm"
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

// loadReleaseValues merges the HelmRelease's values, reading its valuesFrom
// through the cluster with the read-only rights postBuild variables are
// read with, each Secret's values replaced by stand-ins (and those of a
// ConfigMap the target builds with a Secret's variable, or that holds a
// Secret's value); or says why they cannot be (a fork's pull request reads
// none). in.probe, when not nil, is the HelmRelease with the second
// stand-ins of the Secret variables its source uses: its values are the
// probe's.
func loadReleaseValues(ctx context.Context, in chartInput) (*releaseValues, string) {
	hr, access := in.hr, in.access
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	if values == nil {
		values = map[string]any{}
	}
	probeValues := values
	if in.probe != nil {
		probeValues, _, _ = unstructured.NestedMap(in.probe.Object, "spec", "values")
		if probeValues == nil {
			probeValues = map[string]any{}
		}
	}
	raw, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	if len(raw) == 0 {
		out := &releaseValues{merged: values}
		if in.probe != nil {
			out.probe = probeValues
		}
		return out, ""
	}
	var refs []meta.ValuesReference
	if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &refs) != nil {
		return nil, "its valuesFrom cannot be read"
	}
	if why := boundedValuesFrom(refs); why != "" {
		return nil, why
	}
	if access == nil || access.Live == nil {
		return nil, "its values come from ConfigMaps or Secrets in the cluster (valuesFrom), which a fork's pull request does not read"
	}
	out := &releaseValues{fromRefs: true}
	seen := &secretsSeen{Client: access.Live, standIn: 1, secretObjects: in.secretObjects, known: in.hidden}
	merged, err := chartutil.ChartValuesFromReferences(ctx, logr.Discard(), seen, hr.GetNamespace(), copyValues(values), refs...)
	if err != nil {
		var missing *chartutil.ErrValuesReference
		if errors.As(err, &missing) && missing.Reason == chartutil.ErrResourceNotFound {
			if why := encryptedSource(in.objs, hr.GetNamespace(), refs); why != "" {
				return nil, why
			}
			if by := object.SecretMaker(in.objs, missing.Name.Namespace, missing.Name.Name); missing.Kind == "Secret" && by != "" {
				// helm-controller retries until the operator creates it.
				return nil, fmt.Sprintf("its values come from Secret %s/%s, which %s of this target creates once applied: the release is rendered when the cluster holds it", missing.Name.Namespace, missing.Name.Name, by)
			}
			if !rendered(in.objs, missing.Kind, missing.Name.Namespace, missing.Name.Name) {
				// Nor will it be: helm-controller fails the release.
				return nil, failsPrefix + hide.In(err.Error(), seen.hidden)
			}
		}
		return nil, "its valuesFrom: " + hide.In(err.Error(), seen.hidden)
	}
	out.merged, out.hidden = merged, seen.hidden
	if seen.read || in.probe != nil {
		second := &secretsSeen{Client: access.Live, standIn: 2, secretObjects: in.secretObjects, known: in.hidden}
		out.probe, err = chartutil.ChartValuesFromReferences(ctx, logr.Discard(), second, hr.GetNamespace(), copyValues(probeValues), refs...)
		out.hidden = append(out.hidden, second.hidden...)
		out.allSecret = err != nil
	}
	return out, ""
}

// failsPrefix begins why a release is not rendered when helm-controller
// fails it too (Release.Fails).
const failsPrefix = "helm-controller fails this release: its valuesFrom names an object that does not exist and is not optional: "

// rendered says the render holds the object of kind ns/name.
func rendered(objs []*unstructured.Unstructured, kind, ns, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return true
		}
	}
	return false
}

// encryptedSource says, for a valuesFrom the cluster lacks, that the target
// itself makes one of its Secrets from a SOPS-encrypted file, which
// kustomize-controller decrypts and driftback cannot: "" when it does not.
func encryptedSource(objs []*unstructured.Unstructured, namespace string, refs []meta.ValuesReference) string {
	for _, r := range refs {
		for _, o := range objs {
			if r.Kind == "Secret" && o.GetKind() == "Secret" && o.GetName() == r.Name && (o.GetNamespace() == namespace || o.GetNamespace() == "") && object.SOPSEncrypted(o) {
				return fmt.Sprintf("its values come from Secret %s/%s, which this target makes from a SOPS-encrypted file and the cluster does not hold yet: driftback does not decrypt it", namespace, r.Name)
			}
		}
	}
	return ""
}

// Bounds of a HelmRelease's valuesFrom, checked before Helm's parser
// reads a targetPath (list indexes in it allocate as parameters' do).
const maxValuesFrom = 64

// boundedValuesFrom says why a HelmRelease's valuesFrom is refused
// unread, or "".
func boundedValuesFrom(refs []meta.ValuesReference) string {
	if len(refs) > maxValuesFrom {
		return fmt.Sprintf("its valuesFrom names %d sources, over the %d driftback reads", len(refs), maxValuesFrom)
	}
	paths := make([]string, len(refs))
	for i, r := range refs {
		paths[i] = r.TargetPath
	}
	if err := helm.BoundedSetNames(paths); err != nil {
		return "its valuesFrom targetPath: " + err.Error()
	}
	return ""
}

// copyValues is a deep copy: ChartValuesFromReferences merges into what
// it is given.
func copyValues(v map[string]any) map[string]any { return runtime.DeepCopyJSON(v) }

// secretsSeen is a client that gives every Secret it reads with each
// value replaced by its stand-in (standIn 1 or 2), and notes the real
// values, to be redacted wherever the cluster's own objects show them. A
// ConfigMap the target builds with a Secret's variable (secretObjects),
// or that holds a value known to be a Secret's (known), is given so too.
type secretsSeen struct {
	client.Client
	standIn       int
	secretObjects map[string]hide.AsWritten
	known         []string
	read          bool
	hidden        []string
}

func (s *secretsSeen) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && s.secretConfigMap(cm) {
		s.read = true
		for k, v := range cm.Data {
			s.hidden = append(s.hidden, hide.Forms(v)...)
			cm.Data[k] = string(hide.StandIn([]byte(v), s.standIn))
		}
		for k, v := range cm.BinaryData {
			s.hidden = append(s.hidden, hide.Forms(string(v))...)
			cm.BinaryData[k] = hide.StandIn(v, s.standIn)
		}
		return nil
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	s.read = true
	for k, v := range secret.Data {
		s.hidden = append(s.hidden, hide.Forms(string(v))...)
		secret.Data[k] = hide.StandIn(v, s.standIn)
	}
	for k, v := range secret.StringData {
		s.hidden = append(s.hidden, hide.Forms(v)...)
		secret.StringData[k] = string(hide.StandIn([]byte(v), s.standIn))
	}
	return nil
}

// secretConfigMap says cm holds what came from a Secret: the target builds
// it with a Secret's variable, or a value of it holds a known Secret's
// value.
func (s *secretsSeen) secretConfigMap(cm *corev1.ConfigMap) bool {
	if _, ok := s.secretObjects[hide.Key("ConfigMap", cm.Name)]; ok {
		return true
	}
	for _, v := range cm.Data {
		for _, h := range s.known {
			if len(h) >= hide.MinLength && strings.Contains(v, h) {
				return true
			}
		}
	}
	return false
}
