package render_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftback/driftback/render"
)

// TestProvenance proves each rendered object names the repository file it was
// read from, or the kustomization whose generator made it.
func TestProvenance(t *testing.T) {
	tr, err := render.DirTree(fixtureRepo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.Options{Origins: true}).Render(context.Background(), tr, []string{"overlays/prod", "overlays/staging"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]render.Origin{}
	for _, o := range res.Overlays {
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
		objs, err := o.Objects()
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != len(o.Origins) {
			t.Fatalf("%s: %d objects but %d origins", o.Path, len(objs), len(o.Origins))
		}
		for i, obj := range objs {
			got[o.Path+" "+obj.GetKind()+"/"+obj.GetName()] = o.Origins[i]
		}
	}
	want := map[string]render.Origin{
		"overlays/prod Deployment/web":                               {Path: "base/app/deployment.yaml"},
		"overlays/prod Widget/blue":                                  {Path: "overlays/prod/widgets.yaml"},
		"overlays/prod Widget/green":                                 {Path: "overlays/prod/widgets.yaml"},
		"overlays/prod Namespace/shop-prod":                          {Path: "overlays/prod/namespace.yaml"},
		"overlays/prod CustomResourceDefinition/widgets.example.com": {Path: "base/crd/widgets.example.com.yaml"},
		"overlays/staging ServiceMonitor/web-staging":                {Path: "components/monitoring/servicemonitor.yaml"},
		"overlays/staging Service/web-staging":                       {Path: "base/app/service.yaml"},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k]); diff != "" {
			t.Errorf("origin of %s (-want +got):\n%s", k, diff)
		}
	}
	// Generated objects name the kustomization whose generator made them.
	gen := 0
	for k, o := range got {
		if o.ConfiguredIn == "" {
			continue
		}
		gen++
		switch {
		case o.ConfiguredIn == "base/app/kustomization.yaml" && o.ConfiguredBy == "ConfigMapGenerator":
		case o.ConfiguredIn == "overlays/staging/kustomization.yaml" && o.ConfiguredBy == "SecretGenerator":
		case o.ConfiguredIn == "overlays/prod/kustomization.yaml" && o.ConfiguredBy == "SecretGenerator" && strings.HasPrefix(k, "overlays/prod Secret/db-"):
		default:
			t.Errorf("%s: unexpected generator origin %+v", k, o)
		}
	}
	if gen != 4 {
		t.Errorf("%d generated objects carry a generator origin, want 4 (two web-config, web-credentials, db)", gen)
	}
}
