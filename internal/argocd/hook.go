// Package argocd holds what Argo CD decides about an object that more than
// one of driftback's packages needs to decide the same way.
package argocd

// IsHook says whether Argo CD leaves an object with these annotations out of
// what a sync applies, compares and prunes: a hook (argocd.argoproj.io/hook,
// or a Helm hook other than crd-install, as gitops-engine reads them), which
// it runs at a sync phase instead, or an object marked
// argocd.argoproj.io/hook: Skip, which it never applies.
func IsHook(annotations map[string]string) bool {
	if _, ok := annotations["argocd.argoproj.io/hook"]; ok {
		return true
	}
	v, ok := annotations["helm.sh/hook"]
	return ok && v != "crd-install"
}
