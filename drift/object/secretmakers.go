package object

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// SecretMaker names the object among objs, in namespace, whose operator
// creates the Secret namespace/name once it is applied ("ExternalSecret
// shop/db"), or "": an ExternalSecret (external-secrets.io:
// spec.target.name, else its own name; not with a creationPolicy of Merge
// or None, which create nothing), a SealedSecret (bitnami.com), a
// OnePasswordItem (onepassword.com), a VaultStaticSecret,
// VaultDynamicSecret or VaultPKISecret (secrets.hashicorp.com:
// spec.destination.name, only with spec.destination.create).
func SecretMaker(objs []*unstructured.Unstructured, namespace, name string) string {
	for _, o := range objs {
		if o.GetNamespace() != namespace {
			continue
		}
		makes := ""
		switch gvk := o.GroupVersionKind(); {
		case gvk.Group == "external-secrets.io" && gvk.Kind == "ExternalSecret":
			if policy, _, _ := unstructured.NestedString(o.Object, "spec", "target", "creationPolicy"); policy == "Merge" || policy == "None" {
				continue
			}
			makes, _, _ = unstructured.NestedString(o.Object, "spec", "target", "name")
			if makes == "" {
				makes = o.GetName()
			}
		case gvk.Group == "bitnami.com" && gvk.Kind == "SealedSecret", gvk.Group == "onepassword.com" && gvk.Kind == "OnePasswordItem":
			makes = o.GetName()
		case gvk.Group == "secrets.hashicorp.com" && (gvk.Kind == "VaultStaticSecret" || gvk.Kind == "VaultDynamicSecret" || gvk.Kind == "VaultPKISecret"):
			if create, _, _ := unstructured.NestedBool(o.Object, "spec", "destination", "create"); !create {
				continue
			}
			makes, _, _ = unstructured.NestedString(o.Object, "spec", "destination", "name")
		}
		if makes == name {
			return o.GetKind() + " " + namespace + "/" + o.GetName()
		}
	}
	return ""
}
