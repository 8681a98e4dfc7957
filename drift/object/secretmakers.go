package object

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// SecretMaker names the object among objs whose operator creates the Secret
// namespace/name once it is applied ("ExternalSecret shop/db"), or "": an
// ExternalSecret (external-secrets.io: spec.target.name, else its own
// name), a SealedSecret (bitnami.com), a OnePasswordItem (onepassword.com),
// a VaultStaticSecret, VaultDynamicSecret or VaultPKISecret
// (secrets.hashicorp.com: spec.destination.name). An object without a
// namespace is taken to be in namespace.
func SecretMaker(objs []*unstructured.Unstructured, namespace, name string) string {
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != namespace && ns != "" {
			continue
		}
		makes := ""
		switch gvk := o.GroupVersionKind(); {
		case gvk.Group == "external-secrets.io" && gvk.Kind == "ExternalSecret":
			makes, _, _ = unstructured.NestedString(o.Object, "spec", "target", "name")
			if makes == "" {
				makes = o.GetName()
			}
		case gvk.Group == "bitnami.com" && gvk.Kind == "SealedSecret", gvk.Group == "onepassword.com" && gvk.Kind == "OnePasswordItem":
			makes = o.GetName()
		case gvk.Group == "secrets.hashicorp.com" && (gvk.Kind == "VaultStaticSecret" || gvk.Kind == "VaultDynamicSecret" || gvk.Kind == "VaultPKISecret"):
			makes, _, _ = unstructured.NestedString(o.Object, "spec", "destination", "name")
		}
		if makes == name {
			return o.GetKind() + " " + namespace + "/" + o.GetName()
		}
	}
	return ""
}
