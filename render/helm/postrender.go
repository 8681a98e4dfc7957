package helm

import (
	"bytes"
	"encoding/json"
	"sync"

	"helm.sh/helm/v4/pkg/action"
	"sigs.k8s.io/kustomize/api/builtins"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// PostRenderer is a kustomize post-renderer of a Flux HelmRelease: its
// patches and images, applied to what the chart renders.
type PostRenderer struct {
	Patches []kustypes.Patch `json:"patches"`
	Images  []kustypes.Image `json:"images"`
}

// postRenderers run a release's post-renderers in helm-controller's
// order: each kustomize one, then its common metadata's labels and
// annotations, then its own labels (which win).
type postRenderers struct {
	kustomize   []PostRenderer
	common      map[string]string
	annotations map[string]string
	origin      map[string]string
}

// strategy is how Helm gives hooks to the post-renderers: helm-controller's
// default is Helm 4's, combined.
func strategy(s string) action.PostRenderStrategy {
	if s == "" {
		return action.PostRenderStrategyCombined
	}
	return action.PostRenderStrategy(s)
}

// kustomizeMu serializes kustomize builds, as helm-controller does
// (kubernetes-sigs/kustomize#3659).
var kustomizeMu sync.Mutex

func (p postRenderers) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := in
	for _, k := range p.kustomize {
		var err error
		if out, err = k.run(out); err != nil {
			return nil, err
		}
	}
	var ts []resmap.Transformer
	if len(p.common) > 0 {
		ts = append(ts, labels(p.common))
	}
	if len(p.annotations) > 0 {
		ts = append(ts, &builtins.AnnotationsTransformerPlugin{Annotations: p.annotations,
			FieldSpecs: []kustypes.FieldSpec{{Path: "metadata/annotations", CreateIfNotPresent: true}}})
	}
	if len(p.origin) > 0 {
		ts = append(ts, labels(p.origin))
	}
	if len(ts) == 0 {
		return out, nil
	}
	m, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).NewResMapFromBytes(out.Bytes())
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if err := t.Transform(m); err != nil {
			return nil, err
		}
	}
	b, err := m.AsYaml()
	return bytes.NewBuffer(b), err
}

// labels sets labels on every object's metadata, nowhere else.
func labels(l map[string]string) resmap.Transformer {
	return &builtins.LabelTransformerPlugin{Labels: l,
		FieldSpecs: []kustypes.FieldSpec{{Path: "metadata/labels", CreateIfNotPresent: true}}}
}

// run builds a kustomization of the rendered objects with the patches and
// images, in memory, with no plugins.
func (k PostRenderer) run(in *bytes.Buffer) (*bytes.Buffer, error) {
	fs := filesys.MakeFsInMemory()
	cfg := kustypes.Kustomization{Resources: []string{"helm-output.yaml"}, Images: k.Images, Patches: k.Patches}
	cfg.APIVersion, cfg.Kind = kustypes.KustomizationVersion, kustypes.KustomizationKind
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := fs.WriteFile("helm-output.yaml", in.Bytes()); err != nil {
		return nil, err
	}
	if err := fs.WriteFile("kustomization.yaml", b); err != nil {
		return nil, err
	}
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	m, err := krusty.MakeKustomizer(&krusty.Options{LoadRestrictions: kustypes.LoadRestrictionsRootOnly,
		PluginConfig: kustypes.DisabledPluginConfig()}).Run(fs, ".")
	if err != nil {
		return nil, err
	}
	y, err := m.AsYaml()
	return bytes.NewBuffer(y), err
}
