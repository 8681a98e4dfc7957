package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"sigs.k8s.io/yaml"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driftback/driftback/app/auditlog"
	"github.com/driftback/driftback/app/config"
	ghapp "github.com/driftback/driftback/app/github"
	"github.com/driftback/driftback/drift/audit"
	"github.com/driftback/driftback/internal/audittest"
	"github.com/driftback/driftback/internal/kubetest"
)

// auditToken is what the test apiserver's audit webhook sends.
const auditToken = "audit-e2e-token-0123456789"

// TestADriftNamesWhoMadeIt: the apiserver's audit webhook backend points at
// driftback (envtest started with --audit-policy-file and
// --audit-webhook-config-file). Alice (impersonated, as a person's
// kubectl through an OIDC login would be) scales a Deployment; the drift
// pull request names her and her client, mentions and asks for the review
// of the login app.yml maps her to, and its commit names her as co-author.
// A Secret she changes is attributed to her with none of its data kept or
// shown. A batch without the token, or over the size bound, is refused.
func TestADriftNamesWhoMadeIt(t *testing.T) {
	t.Parallel()
	// The apiserver starts before the App, so it sends to a stand-in that
	// hands each batch to the App's endpoint once there is one. Over TLS:
	// its webhook client sends the bearer token over TLS only.
	var handler atomic.Value
	var received atomic.Int64
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := handler.Load().(http.Handler)
		if h == nil {
			w.WriteHeader(http.StatusOK) // the apiserver's own start-up writes
			return
		}
		received.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close) // after the apiserver stops (cleanups run last first): its last batch is taken
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	env := kubetest.NewAudited(t, proxy.URL, auditToken, ca)
	ns := env.Namespace
	secretValue := "alices-db-password-canary"
	d := newDriftWorldOn(t, env, 500*time.Millisecond, nil, func(c *config.Config) {
		c.Audit = config.Audit{Listen: "127.0.0.1:0", Cluster: "test", TokenFile: "set-by-the-test",
			Identities: config.Identities{Users: map[string]string{"alice@example.com": "alice-gh"}, Prefix: "oidc:"}}
	})
	if d.srv.Audit == nil {
		t.Fatal("app.yml's audit section made no receiver")
	}
	d.logs.secret(secretValue)
	d.gh.SetUser("alice-gh", 4242) // not yet a collaborator
	handler.Store(d.srv.Audit.Handler())
	d.run()
	d.settle(2)

	// Alice may scale Deployments and write Secrets here (envtest runs no
	// controller to aggregate the built-in edit role).
	ctx := context.Background()
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "alice"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "alice"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "oidc:alice@example.com"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Setup)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "oidc:alice@example.com", Groups: []string{"team-shop", "system:authenticated"}}
	cfg.UserAgent = "kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef0"
	alice, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of her Role from its watch: her first write
	// waits until it has.
	waitUntil(t, "alice's Role to reach the authorizer", func() bool {
		_, err := alice.AppsV1().Deployments(ns).UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}},
			metav1.UpdateOptions{FieldManager: "kubectl-scale"})
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatal(err)
		}
		return err == nil
	})
	d.waitFor("a drift pull request", func() bool { return len(d.openPulls()) == 1 })
	pr := d.openPulls()[0]
	// She is named as the apiserver authenticated the request: as
	// herself, impersonated by the user acting for her (a login proxy),
	// with her client. Her address is kept from being a mention.
	self, err := env.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alices := "oidc:alice@‍example.com (impersonated by " + self.Status.UserInfo.Username + ") with kubectl"
	// Her login may not read the repository: she is named, never
	// mentioned nor asked.
	if !strings.Contains(pr.Body, alices) || strings.Contains(pr.Body, "@alice-gh") || len(d.gh.Reviewers(fullName, pr.Number)) != 0 {
		t.Errorf("before her login may read the repository, reviewers %v:\n%s", d.gh.Reviewers(fullName, pr.Number), pr.Body)
	}
	// Once it may, her next change mentions and asks her.
	d.gh.SetPermission(fullName, "alice-gh", "write")
	if _, err := alice.AppsV1().Deployments(ns).UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 6}},
		metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor("the pull request to propose 6", func() bool { return strings.Contains(d.pull(pr.Number).Body, "`6`") })
	pr = d.pull(pr.Number)
	if received.Load() == 0 {
		t.Error("the apiserver sent driftback no audit event")
	}
	for _, want := range []string{alices, "(@alice-gh)"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the pull request does not say %q:\n%s", want, pr.Body)
		}
	}
	d.waitFor("alice asked to review", func() bool { return strings.Join(d.gh.Reviewers(fullName, pr.Number), ",") == "alice-gh" })
	tip, err := d.local.CommitObject(d.branch())
	if err != nil {
		t.Fatal(err)
	}
	msg := tip.Message
	if !strings.Contains(msg, "Co-authored-by: alice-gh <4242+alice-gh@users.noreply.github.com>") {
		t.Errorf("the commit message:\n%s", msg)
	}

	// A Secret the target renders, which she changes: attributed, its
	// data nowhere.
	if _, err := alice.CoreV1().Secrets(ns).Patch(ctx, "api-token", types.MergePatchType, []byte(`{"stringData":{"token":"`+secretValue+`"}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	live, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "api-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var edited time.Time
	for _, m := range live.ManagedFields {
		if m.Manager == "kubectl-edit" && m.Time != nil {
			edited = m.Time.Time
		}
	}
	waitUntil(t, "the Secret's write attributed", func() bool {
		who, ok := d.srv.Audit.Index.Attribute(audit.Object{Resource: "secrets", Namespace: ns, Name: "api-token"}, "kubectl-edit", "", edited)
		return ok && who.User == "oidc:alice@example.com"
	})
	// The dashboard names her on the Secret's line, whose values it hides.
	secretLine := func() string {
		is, _ := d.dashboard()
		for _, l := range strings.Split(is.Body, "\n") {
			if strings.HasPrefix(l, "|") && strings.Contains(l, "api-token") {
				return l
			}
		}
		return ""
	}
	d.waitFor("the dashboard to name her on the Secret's line", func() bool { return strings.Contains(secretLine(), alices) })
	if is, _ := d.dashboard(); strings.Contains(is.Body, secretValue) {
		t.Error("the dashboard shows the Secret's value")
	}

	// What is not authenticated, or too large, is refused unread.
	before := d.srv.Audit.Index.Len()
	for _, c := range []struct {
		auth string
		body string
		want int
	}{
		{"", `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`, http.StatusUnauthorized},
		{"Bearer " + auditToken, strings.Repeat(" ", auditlog.DefaultMaxBatchBytes+1), http.StatusRequestEntityTooLarge}, // the shipped bound
	} {
		if code := audittest.Post(t, proxy.Client(), http.MethodPost, proxy.URL, c.auth, strings.NewReader(c.body)); code != c.want {
			t.Errorf("%q: %d, want %d", c.auth, code, c.want)
		}
	}
	if d.srv.Audit.Index.Len() != before {
		t.Error("a refused batch was read")
	}
	for outcome, least := range map[string]float64{"received": 1, "kept": 1, "matched": 1, "refused": 2} {
		if got := counter(t, d.srv.Metrics, "driftback_audit_events_total", map[string]string{"outcome": outcome}); got < least {
			t.Errorf("driftback_audit_events_total{outcome=%q} = %v, want at least %v", outcome, got, least)
		}
	}
	for _, p := range d.gh.Pulls(fullName) {
		if strings.Contains(p.Body, secretValue) {
			t.Errorf("pull request #%d shows the Secret's value", p.Number)
		}
	}
}

// TestAuditEventsReachTheReplicaRunningTheDriftLoop: two replicas serve as
// `driftback serve` does (the shipped app.yml and its leader election), each
// with the audit endpoint. A batch the apiserver sends to the replica that
// does not run the cluster's drift loop is carried, over TLS to the peer
// serving the endpoint's certificate and with the apiserver's token, to the
// one that does, which reads it; the other keeps nothing.
func TestAuditEventsReachTheReplicaRunningTheDriftLoop(t *testing.T) {
	t.Setenv("POD_IP", "127.0.0.1") // read by both replicas: not parallel
	w := newWorld(t, nil)
	w.stop()
	// The target's sources, which the drift loop renders: then it knows
	// which objects' events to keep.
	w.gh.BranchHead = func(repo, branch string) (string, bool) {
		refs, err := ghapp.RemoteRefs(context.Background(), w.git.HTTPAddress()+"/"+repo+".git", w.gh.Token(instID))
		sha, ok := refs["refs/heads/"+branch]
		return sha, ok && err == nil
	}
	w.push(map[string]plumbing.Hash{"refs/heads/main": w.commit(plumbing.ZeroHash, driftRepo)})
	_, certPEM, keyPEM := audittest.Cert(t, "driftback-audit", nil, true)
	certFile, keyFile := filepath.Join(w.dir, "audit.crt"), filepath.Join(w.dir, "audit.key")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := func(k string) string {
		if k == "DRIFTBACK_AUDIT_TOKEN" {
			return auditToken
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	var replicas []*Server
	var stopped []chan struct{}
	t.Cleanup(func() {
		cancel()
		for _, done := range stopped {
			<-done
		}
	})
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		var raw map[string]any
		b, err := os.ReadFile(w.shippedConfig(addr))
		if err == nil {
			err = yaml.Unmarshal(b, &raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		raw["server"].(map[string]any)["cacheDir"] = filepath.Join(w.dir, fmt.Sprintf("serve-cache-%d", i))
		raw["audit"] = map[string]any{"cluster": "production", "listen": "127.0.0.1:0", "tls": map[string]any{"certFile": certFile, "keyFile": keyFile}}
		file := filepath.Join(w.dir, fmt.Sprintf("app-%d.yml", i))
		if b, err = yaml.Marshal(raw); err == nil {
			err = os.WriteFile(file, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.LoadConfig(file, env)
		if err != nil {
			t.Fatal(err)
		}
		secrets, err := cfg.LoadSecrets(env)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(ctx, cfg, secrets, w.logs.logger(t, slog.LevelWarn).With("replica", i))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(ctx, addr, 5*time.Second); err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}()
		replicas, stopped = append(replicas, srv), append(stopped, done)
	}
	var holder, other *Server
	eventually(t, func() bool {
		for i, s := range replicas {
			if slices.Contains(s.heldClusters(), "production") && replicas[1-i].Audit.Addr() != "" {
				holder, other = s, replicas[1-i]
				return true
			}
		}
		return false
	}, "a replica to run the cluster's drift loop")

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	send := func() int {
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00") // as the apiserver writes
		body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/shop/deployments/web/scale","verb":"patch","user":{"username":"alice@example.com"},"userAgent":"kubectl/v1.37.2","objectRef":{"resource":"deployments","namespace":"shop","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"` + now + `","stageTimestamp":"` + now + `"}]}`
		return audittest.Post(t, client, http.MethodPost, "https://"+other.Audit.Addr(), "Bearer "+auditToken, strings.NewReader(body))
	}
	// Until the other replica's next look at the Leases, it knows of no
	// holder, and asks the apiserver to send again.
	eventually(t, func() bool { return send() == http.StatusOK }, "the batch to be taken")
	outcome := func(s *Server, o string) float64 {
		return counter(t, s.Metrics, "driftback_audit_events_total", map[string]string{"outcome": o})
	}
	if outcome(holder, "received") != 1 || outcome(other, "forwarded") != 1 || outcome(other, "received") != 0 {
		t.Errorf("the holder received %v; the other forwarded %v and received %v; want 1, 1, 0",
			outcome(holder, "received"), outcome(other, "forwarded"), outcome(other, "received"))
	}
}
