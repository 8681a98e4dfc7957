package app

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/driftback/driftback/internal/kubetest"
	"github.com/driftback/driftback/render"
)

// applyDeployRBAC applies the service account, the read-only ClusterRole and
// its binding from deploy/base, as an install does.
func applyDeployRBAC(t *testing.T, env *kubetest.Env) {
	t.Helper()
	tree, err := render.DirTree(filepath.Join("..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.New(render.DefaultOptions()).Render(context.Background(), tree, []string{"base"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := res.Overlays[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
			install = append(install, o)
		}
	}
	if len(install) < 4 {
		t.Fatalf("deploy/base gave %d of the namespace, service account, role and binding", len(install))
	}
	kubetest.Apply(t, env.Config, "driftback-install", install...)
}

// TestReadOnlyIdentityIsEnough runs driftback's cluster access as the
// service account deploy/ installs, with only its read-only ClusterRole: the
// pull-request flow shows live data and the drift loop opens its pull
// request, while a write under that identity is forbidden.
func TestReadOnlyIdentityIsEnough(t *testing.T) {
	t.Parallel()
	d := newDriftWorld(t, 300*time.Millisecond, nil)
	applyDeployRBAC(t, d.env)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: d.env.Config.Host, CertificateAuthorityData: d.env.Config.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: d.env.Config.CertData, ClientKeyData: d.env.Config.KeyData,
		Impersonate:       "system:serviceaccount:driftback:driftback",
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:driftback", "system:authenticated"}}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(d.dir, "driftback-sa.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	c := d.cfg.Clusters["test"]
	c.Kubeconfig = path
	d.cfg.Clusters["test"] = c

	// The identity is in effect: it cannot write.
	restCfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().ConfigMaps(d.env.Namespace).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nope"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("creating a ConfigMap as driftback: %v, want forbidden", err)
	}

	// The pull-request flow reads the cluster.
	head := d.commit(d.main, map[string]any{"deploy/prod/kustomization.yaml": strings.Replace(driftRepo["deploy/prod/kustomization.yaml"].(string), "count: 2", "count: 3", 1)})
	d.openPR(1, d.main, head, nil)
	if code := d.deliver("pull_request", "rbac-open", prPayload("opened", 1, head.String())); code != http.StatusAccepted {
		t.Fatalf("opened: %d", code)
	}
	for _, r := range d.waitChecks(head.String(), 2) {
		if r.Name == "driftback / prod" && (r.Conclusion != "success" || strings.Contains(r.Summary, "could not be read")) {
			t.Errorf("prod's check as the read-only identity: %s %s\n%s", r.Conclusion, r.Title, r.Summary)
		}
	}
	comments := d.gh.Comments(fullName, 1)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "changed by this PR `.spec.replicas`: Git `2` → `3`") || strings.Contains(comments[0].Body, "forbidden") {
		t.Fatalf("the comment as the read-only identity: %+v", comments)
	}

	// The drift loop watches and opens its pull request.
	d.push(map[string]plumbing.Hash{"refs/heads/main": d.main})
	d.run()
	d.scale(5, "kubectl")
	d.waitFor("the drift pull request", func() bool {
		for _, p := range d.openPulls() {
			if p.HeadRef == "driftback/drift/prod" {
				return true
			}
		}
		return false
	})
}
