package drift_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/livestate"
	"github.com/driftback/driftback/drift/object"
)

// sopsSecret is a Secret as SOPS writes it into Git: values encrypted, a
// sops: block beside them. KEY stands for the password's ciphertext.
const sopsSecret = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: NS}
type: Opaque
stringData:
  password: ENC[AES256_GCM,data:KEY,iv:aaaa,tag:bbbb,type:str]
  user: ENC[AES256_GCM,data:dXNlcg==,iv:cccc,tag:dddd,type:str]
sops:
  mac: ENC[AES256_GCM,data:MAC,iv:eeee,tag:ffff,type:str]
  lastmodified: "2026-11-30T10:00:00Z"
  version: 3.9.0
  age: [{recipient: age1example, enc: "-----BEGIN AGE ENCRYPTED FILE-----"}]
`

// sopsConfigMap is a whole document SOPS encrypted.
const sopsConfigMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data:
  endpoint: ENC[AES256_GCM,data:ENDPOINT,iv:1111,tag:2222,type:str]
sops:
  mac: ENC[AES256_GCM,data:MAC,iv:3333,tag:4444,type:str]
  version: 3.9.0
`

// TestSOPSObjectsAreComparedEncrypted: Git holds ciphertext and the cluster
// the decrypted values, so the live values cannot be compared; the pull
// request's own change (which keys) is shown, never a byte of ciphertext,
// and the sops: block is no schema error.
func TestSOPSObjectsAreComparedEncrypted(t *testing.T) {
	c := newCluster(t)
	ns := c.env.Namespace
	at := func(y, key, mac string) *unstructured.Unstructured {
		return obj(t, strings.NewReplacer("NS", ns, "data:KEY", "data:"+key, "data:MAC", "data:"+mac, "data:ENDPOINT", "data:"+key).Replace(y))
	}
	// What Flux applied, decrypted.
	c.apply(obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: "+ns+"}\nstringData: {password: old-password, user: user}\n"), "kustomize-controller")
	c.apply(obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+ns+"}\ndata: {endpoint: https://db.internal}\n"), "kustomize-controller")

	base := []*unstructured.Unstructured{at(sopsSecret, "b2xk", "MAC1"), at(sopsConfigMap, "ZW5kMQ==", "MAC1")}
	head := []*unstructured.Unstructured{at(sopsSecret, "bmV3", "MAC2"), at(sopsConfigMap, "ZW5kMQ==", "MAC2")}
	reader, err := livestate.NewClusterReader(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, live := range []object.LiveReader{nil, reader} {
		target, err := drift.Compare(context.Background(), live, drift.Input{Path: "app", Base: base, Head: head, HasBase: true}, drift.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if len(target.Errors) > 0 {
			t.Fatalf("live %v: errors: %v", live != nil, target.Errors)
		}
		out, _ := json.Marshal(target)
		for _, s := range []string{"AES256_GCM", "bmV3", "b2xk", `"sops"`, "lastmodified", "old-password", "MAC2", "AGE ENCRYPTED"} {
			if strings.Contains(string(out), s) {
				t.Errorf("live %v: the report shows %q: %s", live != nil, s, out)
			}
		}
		var pr []string
		for _, ch := range target.PR {
			for _, f := range ch.Fields {
				pr = append(pr, ch.Kind+" "+f.Path)
			}
		}
		if strings.Join(pr, ",") != "Secret .data.password" {
			t.Errorf("live %v: the pull request changes the Secret's password, and nothing of the ConfigMap: %v", live != nil, pr)
		}
		if live == nil {
			continue
		}
		for _, ch := range append(append([]drift.Change{}, target.Changes...), target.Drift...) {
			if ch.Action != drift.ActionUnchanged || !strings.Contains(ch.Note, "encrypted with SOPS") {
				t.Errorf("%s/%s: a live comparison of an encrypted object: %+v", ch.Kind, ch.Name, ch)
			}
		}
	}
}
