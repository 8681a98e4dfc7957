package object

import (
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// generatedName is a name kustomize's generators make: a stem, a dash and
// ten characters of the content's hash in kustomize's alphabet (hex with
// 0, 1, 3, a and e replaced by g, h, k, m and t).
var generatedName = regexp.MustCompile(`^(.+)-[2456789bcdfghkmt]{10}$`)

// Succession says how an object that leaves a render is replaced in it.
type Succession int

// Successions.
const (
	// NoSuccessor: nothing takes its place.
	NoSuccessor Succession = iota
	// MovedNamespace: the same kind and name in another namespace.
	MovedNamespace
	// Regenerated: the same generator's object under its new hashed name
	// (its content changed).
	Regenerated
)

// Successor finds the object of objs that takes ref's place once ref leaves:
// the same object moved to another namespace (deleted and created again, as
// a namespace is part of an object's identity), or a generated ConfigMap or
// Secret whose hashed name changed with its content.
func Successor(ref Ref, objs []*unstructured.Unstructured) (*unstructured.Unstructured, Succession) {
	stem := generatedName.FindStringSubmatch(ref.Name)
	for _, o := range objs {
		r := RefOf(o)
		if r.Group != ref.Group || r.Kind != ref.Kind {
			continue
		}
		if r.Name == ref.Name && r.Namespace != ref.Namespace {
			return o, MovedNamespace
		}
		if stem != nil && r.Namespace == ref.Namespace && r.Name != ref.Name {
			if m := generatedName.FindStringSubmatch(r.Name); m != nil && m[1] == stem[1] {
				return o, Regenerated
			}
		}
	}
	return nil, NoSuccessor
}
