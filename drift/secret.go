package drift

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/driftback/driftback/drift/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// secretKey keys the tokens Secret values are replaced with. It is random per
// process, so a token says whether two values are equal and nothing else.
var secretKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand does not fail on Linux
	return k
}()

const hiddenPrefix = "hidden:"

// isSecret reports whether u is a core Secret.
func isSecret(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// maskSecret replaces every value of a Secret with an opaque token, in place,
// before the object is compared or shown anywhere: stringData is folded into
// data (as the server does on write), and the last-applied annotation, which
// holds a copy of the data, is dropped.
func maskSecret(u *unstructured.Unstructured) {
	if !isSecret(u) {
		return
	}
	// A data or stringData that is not a map is not a valid Secret, but its
	// content is still secret: it becomes one opaque value.
	for _, field := range []string{"data", "stringData"} {
		if v, ok := u.Object[field]; ok {
			if _, isMap := v.(map[string]any); !isMap {
				u.Object[field] = map[string]any{"(unreadable)": "(not a map)"}
			}
		}
	}
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	if data == nil {
		data = map[string]any{}
	}
	if sd, _, _ := unstructured.NestedMap(u.Object, "stringData"); sd != nil {
		for k, v := range sd {
			s, _ := v.(string)
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
		unstructured.RemoveNestedField(u.Object, "stringData")
	}
	for k, v := range data {
		s, _ := v.(string)
		mac := hmac.New(sha256.New, secretKey)
		mac.Write([]byte(k))
		mac.Write([]byte{0})
		mac.Write([]byte(s))
		// Still base64, so the Secret keeps converting to its Go type.
		data[k] = base64.StdEncoding.EncodeToString([]byte(hiddenPrefix + hex.EncodeToString(mac.Sum(nil))[:16]))
	}
	if len(data) > 0 {
		u.Object["data"] = data
	}
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			u.SetAnnotations(a)
		}
	}
}

// maskAll masks every Secret among objs, returning copies.
func maskAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		c := o.DeepCopy()
		if object.SOPSEncrypted(c) {
			object.MaskSOPS(c)
		}
		maskSecret(c)
		out[i] = c
	}
	return out
}

// hideSecretFields blanks the values of a Secret's data fields in a field list.
func hideSecretFields(c *Change) {
	if !c.Secret {
		return
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		if p := f.FieldPath(); len(p) > 0 && p[0].FieldName != nil && (*p[0].FieldName == "data" || *p[0].FieldName == "stringData") {
			f.Live, f.Desired, f.Base, f.Hidden = hidden(f.Live), hidden(f.Desired), hidden(f.Base), true
		}
	}
}

// hiddenValue stands in for a Secret value that exists.
const hiddenValue = "(hidden)"

func hidden(v any) any {
	if v == nil {
		return nil
	}
	return hiddenValue
}

// secretsFromGit puts in each live Secret, in place of its values, the
// values of the Secret in base (in head, when base has none; none, when
// neither has it): what is left to compare is what Git changes.
func secretsFromGit(live map[string]*unstructured.Unstructured, base, head []*unstructured.Unstructured) {
	inGit := map[string]*unstructured.Unstructured{}
	for _, objs := range [][]*unstructured.Unstructured{head, base} { // base wins
		for _, o := range objs {
			if isSecret(o) {
				inGit[object.RefOf(o).Key()] = o
			}
		}
	}
	for k, o := range live {
		if o == nil || !isSecret(o) {
			continue
		}
		delete(o.Object, "data")
		if g := inGit[k]; g != nil {
			if d, ok := g.Object["data"]; ok {
				o.Object["data"] = runtime.DeepCopyJSONValue(d)
			}
		}
	}
}

// valuesFromGit puts in each live object, at the fields gitOnly gives for
// its base or head render, the base's values (the head's, when base has
// no such object; none, when Git sets none there).
func valuesFromGit(live map[string]*unstructured.Unstructured, base, head []*unstructured.Unstructured, gitOnly func(*unstructured.Unstructured) []fieldpath.Path) {
	inGit := map[string]*unstructured.Unstructured{}
	paths := map[string][]fieldpath.Path{}
	for _, objs := range [][]*unstructured.Unstructured{head, base} { // base wins
		for _, o := range objs {
			k := object.RefOf(o).Key()
			inGit[k] = o
			paths[k] = append(paths[k], gitOnly(o)...)
		}
	}
	for k, ps := range paths {
		l := live[k]
		if l == nil || len(ps) == 0 {
			continue
		}
		g := inGit[k]
		for _, p := range ps {
			v := object.ValueAt(g.Object, p)
			switch {
			case v == nil:
				object.RemoveValueAt(l.Object, p)
			case object.ValueAt(l.Object, p) == nil:
				// The cluster has no such field (or list item): that
				// says nothing of a Secret's value, and stays a change.
			default:
				if set, err := object.SetValueAt(l.Object, p, runtime.DeepCopyJSONValue(v)); err == nil {
					l.Object = set.(map[string]any)
				} else {
					object.RemoveValueAt(l.Object, p) // never compared with the live value
				}
			}
		}
	}
}
