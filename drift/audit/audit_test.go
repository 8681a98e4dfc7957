package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/audit"
	"github.com/driftback/driftback/drift/object"
)

var t0 = time.Date(2026, 12, 5, 9, 12, 0, 0, time.UTC)

// micro is the apiserver's timestamps' format.
const micro = "2006-01-02T15:04:05.000000Z07:00"

// event is one audit event as the webhook backend writes it.
func event(verb, user, impersonated, ua, uri, resource, sub, name string, code int, at time.Time) string {
	imp := ""
	if impersonated != "" {
		imp = fmt.Sprintf(`"impersonatedUser":{"username":%q,"groups":["team-shop","system:authenticated"]},`, impersonated)
	}
	return strings.ReplaceAll(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"x","stage":"ResponseComplete",
"requestURI":%q,"verb":%q,"user":{"username":%q,"groups":["system:masters"]},%s"userAgent":%q,
"objectRef":{"resource":%q,"namespace":"shop","name":%q,"apiGroup":"apps","apiVersion":"v1","subresource":%q},
"responseStatus":{"metadata":{},"code":%d},"requestObject":{"spec":{"replicas":5},"data":{"password":"s3cret"}},
"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, uri, verb, user, imp, ua, resource, name, sub, code, at.Add(-50*time.Millisecond).Format(micro), at.Format(micro)), "\n", "") // one line, as the log backend writes
}

func decode(t *testing.T, list bool, events ...string) []auditv1.Event {
	t.Helper()
	if list {
		out, err := audit.DecodeList(strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(events, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out, bad := audit.DecodeLines(strings.NewReader(strings.Join(events, "\n")))
	if bad != 0 {
		t.Fatalf("%d bad lines", bad)
	}
	return out
}

var shop = audit.Object{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "web"}

// TestAChangeIsAttributedToWhoMadeIt: of the writes to an object, the one
// its field manager made (by the request's fieldManager, else the client
// its user agent names), through the same subresource, within seconds of
// its managed time, gives the person: the impersonated user when someone
// acted as another. Reads, failed writes, other objects and other
// subresources attribute nothing; no matching event leaves the change
// unattributed.
func TestAChangeIsAttributedToWhoMadeIt(t *testing.T) {
	for _, list := range []bool{true, false} {
		events := decode(t, list,
			event("patch", "admin", "alice@example.com", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0.Add(300*time.Millisecond)),
			event("patch", "bob@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web", "deployments", "", "web", 200, t0.Add(time.Minute)),
			event("patch", "mallory@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 403, t0),
			event("get", "carol@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale", "deployments", "scale", "web", 200, t0),
			event("patch", "dave@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/api/scale?fieldManager=kubectl-scale", "deployments", "scale", "api", 200, t0),
			event("patch", "erin@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale&dryRun=All", "deployments", "scale", "web", 200, t0.Add(500*time.Millisecond)),
		)
		for _, e := range events {
			if e.RequestObject != nil || e.ResponseObject != nil {
				t.Errorf("a body was kept: %s", e.RequestObject.Raw)
			}
		}
		x := audit.NewIndex(audit.Options{Keep: func(o audit.Object) bool { return o.Name == "web" }})
		c := x.Add(events, t0.Add(2*time.Minute))
		if c.Kept != 2 || c.Ignored != 4 || c.Dropped != 0 || x.Len() != 2 {
			t.Fatalf("list %v: %+v, %d held; want 2 kept (alice's and bob's writes), 4 ignored (a failed write, a read, another object, a dry run)", list, c, x.Len())
		}
		who, ok := x.Attribute(shop, "kubectl-scale", "scale", t0)
		if !ok || who.User != "alice@example.com" || who.ImpersonatedBy != "admin" || who.Client() != "kubectl" || who.Verb != "patch" || !strings.Contains(strings.Join(who.Groups, ","), "team-shop") {
			t.Errorf("list %v: the scale: %+v %v; want alice, impersonated by admin, with kubectl", list, who, ok)
		}
		if who.ImpersonatedBy != "" && !strings.Contains(who.Person(audit.Identities{}).String(), "alice@example.com (impersonated by admin) with kubectl") {
			t.Errorf("list %v: said as %q", list, who.Person(audit.Identities{}).String())
		}
		// Bob's edit has no fieldManager: its manager is the client's name.
		if who, ok := x.Attribute(shop, "kubectl", "", t0.Add(time.Minute)); !ok || who.User != "bob@example.com" {
			t.Errorf("list %v: the edit: %+v %v", list, who, ok)
		}
		for _, c := range []struct {
			manager, sub string
			at           time.Time
		}{{"kubectl-scale", "scale", t0.Add(10 * time.Second)}, {"kubectl-edit", "", t0.Add(time.Minute)}, {"kubectl-scale", "", t0}} {
			if who, ok := x.Attribute(shop, c.manager, c.sub, c.at); ok {
				t.Errorf("list %v: %+v attributed to %+v", list, c, who)
			}
		}
	}
}

// TestTheIndexIsBounded: a flood beyond MaxEvents lets the oldest events
// go, never the newest, and never grows the index; events older than the
// retention leave it.
func TestTheIndexIsBounded(t *testing.T) {
	var lines []string
	for i := range 50 {
		lines = append(lines, event("patch", fmt.Sprintf("user-%d", i), "", "kubectl/v1", "/x?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0.Add(time.Duration(i)*time.Second)))
	}
	events := decode(t, true, lines...)
	x := audit.NewIndex(audit.Options{MaxEvents: 20, Retention: time.Hour, Keep: func(audit.Object) bool { return true }})
	if c := x.Add(events, t0.Add(time.Minute)); c.Kept != 50 || c.Dropped != 30 || x.Len() != 20 {
		t.Errorf("%+v, %d held; want the 20 newest held, 30 let go", c, x.Len())
	}
	if who, ok := x.Attribute(shop, "kubectl-scale", "scale", t0.Add(49*time.Second)); ok {
		t.Errorf("20 people wrote through one manager: attributed to %s", who.User)
	}
	if c := x.Add(events[:1], t0.Add(2*time.Hour)); c.Kept != 0 || x.Len() != 0 {
		t.Errorf("after the retention: %+v, %d held", c, x.Len())
	}
}

// TestOneManagerSeveralPeopleIsNoOnesChange: when two people wrote an
// object through the same field manager, which of them set a field is not
// known: nobody is named (never the wrong person).
func TestOneManagerSeveralPeopleIsNoOnesChange(t *testing.T) {
	x := audit.NewIndex(audit.Options{Keep: func(audit.Object) bool { return true }})
	x.Add(decode(t, true,
		event("patch", "alice@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web?fieldManager=kubectl-edit", "deployments", "", "web", 200, t0),
		event("patch", "bob@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web?fieldManager=kubectl-edit", "deployments", "", "web", 200, t0.Add(time.Minute))), t0.Add(2*time.Minute))
	if who, ok := x.Attribute(shop, "kubectl-edit", "", t0.Add(time.Minute)); ok {
		t.Errorf("attributed to %s", who.User)
	}
}

// TestBadInputIsSaid: a cut batch is an error; a line that is not an
// event is skipped and counted, and its neighbours are read.
func TestBadInputIsSaid(t *testing.T) {
	if _, err := audit.DecodeList(strings.NewReader(`{"kind":"EventList","items":[{`)); err == nil || !strings.Contains(err.Error(), "audit EventList") {
		t.Errorf("a cut batch: %v", err)
	}
	good := event("patch", "a", "", "k/1", "/x", "deployments", "", "web", 200, t0)
	events, bad := audit.DecodeLines(strings.NewReader(good + "\nnot json\n" + `{"kind":"EventList","items":[]}` + "\n" + good + "\n"))
	if len(events) != 2 || bad != 2 {
		t.Errorf("%d events, %d bad; want 2 and 2", len(events), bad)
	}
}

// TestDriftIsAttributedFieldByField: each live-changed field of a drift
// gets the person whose write its manager's entry records, with the
// GitHub login app.yml maps them to (an OIDC name with its prefix too); a
// field whose manager wrote nothing the index holds stays unattributed.
func TestDriftIsAttributedFieldByField(t *testing.T) {
	events := decode(t, true,
		event("patch", "admin", "oidc:alice@example.com", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0))
	x := audit.NewIndex(audit.Options{Keep: func(audit.Object) bool { return true }})
	x.Add(events, t0.Add(time.Minute))
	scaled, edited := t0, t0.Add(-time.Hour)
	changes := []drift.Change{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Action: drift.ActionUpdate, Fields: []object.Field{
		{Path: ".spec.replicas", Manager: "kubectl-scale", Subresource: "scale", Time: &scaled},
		{Path: ".spec.template.spec.containers[name=\"web\"].image", Manager: "kubectl-edit", Time: &edited},
	}}}
	resource := func(group, kind string) string {
		if group == "apps" && kind == "Deployment" {
			return "deployments"
		}
		return ""
	}
	n := x.AttributeChanges(changes, resource, audit.Identities{Users: map[string]string{"alice@example.com": "alice-gh"}, Prefix: "oidc:"})
	by := changes[0].Fields[0].By
	if n != 1 || by == nil || by.User != "oidc:alice@example.com" || by.Login != "alice-gh" || by.Client != "kubectl" || changes[0].Fields[1].By != nil {
		t.Errorf("%d attributed: %+v, %+v", n, by, changes[0].Fields[1].By)
	}
	// The drift loop looks at a drift again and again: its event is
	// matched once (the metric counts events, not looks).
	changes[0].Fields[0].By = nil
	if n := x.AttributeChanges(changes, resource, audit.Identities{}); n != 0 || changes[0].Fields[0].By == nil {
		t.Errorf("a second look: %d newly matched, %+v; want 0, still attributed", n, changes[0].Fields[0].By)
	}
}

// TestTheClientIsTheManagerTheAPIServerNames: a request without a
// fieldManager is managed under the name the apiserver takes from its user
// agent (k8s.io/apiserver's prefixFromUserAgent): up to the first "/",
// without characters that do not print, in at most 128 bytes (never a
// rune cut); spaces kept.
func TestTheClientIsTheManagerTheAPIServerNames(t *testing.T) {
	for ua, want := range map[string]string{
		"kubectl/v1.37.2 (linux/amd64) kubernetes/abc": "kubectl",
		"Mozilla/5.0":                   "Mozilla",
		"my tool":                       "my tool",
		" k9s /v0.32":                   " k9s ",
		"evil\x00\x1b[31m":              "evil[31m",
		strings.Repeat("é", 100) + "/1": strings.Repeat("é", 64),
		"a" + strings.Repeat("é", 100):  "a" + strings.Repeat("é", 63),
		"":                              "",
	} {
		if got := (audit.Who{UserAgent: ua}).Client(); got != want {
			t.Errorf("%q: %q, want %q", ua, got, want)
		}
	}
}

// TestAUserAgentCutByTheAuditLogNamesNoOne: the audit log cuts a user
// agent at 1,024 bytes; cut before its first "/", it hides the manager the
// apiserver named. Its writer may have set the field: nobody is named
// rather than the wrong person.
func TestAUserAgentCutByTheAuditLogNamesNoOne(t *testing.T) {
	x := audit.NewIndex(audit.Options{Keep: func(audit.Object) bool { return true }})
	// Characters that do not print, which the apiserver leaves out of the
	// manager's name, as JSON writes them.
	cut := strings.Replace(event("patch", "mallory@example.com", "", "kubectl@@...TRUNCATED", "/apis/apps/v1/namespaces/shop/deployments/web", "deployments", "", "web", 200, t0.Add(200*time.Millisecond)),
		"@@", strings.Repeat(`\u0001`, 1017), 1)
	x.Add(decode(t, true,
		event("patch", "alice@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web", "deployments", "", "web", 200, t0), cut,
		event("patch", "bob@example.com", "", "Helm/4.3.2", "/apis/apps/v1/namespaces/shop/deployments/web", "deployments", "", "web", 200, t0)), t0.Add(time.Minute))
	if who, ok := x.Attribute(shop, "kubectl", "", t0); ok {
		t.Errorf("attributed to %s", who.User)
	}
	// What is left of it ("kubectl") cannot begin "Helm": Helm's write is
	// Bob's.
	if who, ok := x.Attribute(shop, "Helm", "", t0); !ok || who.User != "bob@example.com" {
		t.Errorf("Helm's write: %+v %v", who, ok)
	}
}
