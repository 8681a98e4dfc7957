package crddefaults_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/driftback/driftback/internal/crddefaults"
	"github.com/driftback/driftback/internal/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

var crdYAML = strings.ReplaceAll(kubetest.DefaultingCRD, "GROUP", "defaults.example.com")

func TestCRDDefaultsAgainstServer(t *testing.T) {
	env := kubetest.New(t)
	dyn, err := dynamic.NewForConfig(env.Setup)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(crdYAML), &crd); err != nil {
		t.Fatal(err)
	}
	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	body, _ := json.Marshal(crd)
	force := true
	if _, err := dyn.Resource(crdRes).Patch(context.Background(), "gadgets.defaults.example.com", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "t", Force: &force}); err != nil {
		t.Fatal(err)
	}
	schemas, err := crddefaults.SchemasFromUnstructured(&unstructured.Unstructured{Object: crd})
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "defaults.example.com", Version: "v1", Resource: "gadgets"}
	for _, cr := range []string{
		`{apiVersion: defaults.example.com/v1, kind: Gadget, metadata: {name: a}}`,
		`{apiVersion: defaults.example.com/v1, kind: Gadget, metadata: {name: b}, spec: {mode: null, ports: [{port: 80}, {port: 53, protocol: UDP}], opts: {x: {}, z: {level: 1}}}}`,
	} {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(cr), &m); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetNamespace(env.Namespace)
		body, _ := json.Marshal(u.Object)
		var srv *unstructured.Unstructured
		deadline := time.Now().Add(30 * time.Second)
		for {
			srv, err = dyn.Resource(gvr).Namespace(env.Namespace).Patch(context.Background(), u.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "t", Force: &force, DryRun: []string{metav1.DryRunAll}})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		local := crddefaults.Default(u, schemas["v1"])
		sj, _ := json.Marshal(srv.Object["spec"])
		lj, _ := json.Marshal(local.Object["spec"])
		t.Logf("%s server spec: %s", u.GetName(), sj)
		t.Logf("%s local  spec: %s", u.GetName(), lj)
		var a, b any
		_ = json.Unmarshal(sj, &a)
		_ = json.Unmarshal(lj, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: server and local differ", u.GetName())
		}
	}
}
