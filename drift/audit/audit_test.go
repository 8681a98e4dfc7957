package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"x","stage":"ResponseComplete",
"requestURI":%q,"verb":%q,"user":{"username":%q,"groups":["system:masters"]},%s"userAgent":%q,
"objectRef":{"resource":%q,"namespace":"shop","name":%q,"apiGroup":"apps","apiVersion":"v1","subresource":%q},
"responseStatus":{"metadata":{},"code":%d},"requestObject":{"spec":{"replicas":5},"data":{"password":"s3cret"}},
"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, uri, verb, user, imp, ua, resource, name, sub, code, at.Add(-50*time.Millisecond).Format(micro), at.Format(micro))
}

func decode(t *testing.T, list bool, events ...string) *strings.Reader {
	t.Helper()
	if list {
		return strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(events, ",") + `]}`)
	}
	return strings.NewReader(strings.Join(events, "\n"))
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
		events, err := audit.Decode(decode(t, list,
			event("patch", "admin", "alice@example.com", "kubectl/v1.37.2 (linux/amd64) kubernetes/abc", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0.Add(300*time.Millisecond)),
			event("patch", "bob@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web", "deployments", "", "web", 200, t0.Add(time.Minute)),
			event("patch", "mallory@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 403, t0),
			event("get", "carol@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale", "deployments", "scale", "web", 200, t0),
			event("patch", "dave@example.com", "", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/api/scale?fieldManager=kubectl-scale", "deployments", "scale", "api", 200, t0),
		))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.RequestObject != nil || e.ResponseObject != nil {
				t.Errorf("a body was kept: %s", e.RequestObject.Raw)
			}
		}
		x := audit.NewIndex(audit.Options{Keep: func(o audit.Object) bool { return o.Name == "web" }})
		c := x.Add(events, t0.Add(2*time.Minute))
		if c.Kept != 2 || c.Ignored != 3 || c.Dropped != 0 || x.Len() != 2 {
			t.Fatalf("list %v: %+v, %d held; want 2 kept (alice's and bob's writes), 3 ignored", list, c, x.Len())
		}
		who, ok := x.Attribute(shop, "kubectl-scale", "scale", t0)
		if !ok || who.User != "alice@example.com" || who.Client() != "kubectl" || who.Verb != "patch" || !strings.Contains(strings.Join(who.Groups, ","), "team-shop") {
			t.Errorf("list %v: the scale: %+v %v; want alice, impersonated, with kubectl", list, who, ok)
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

// TestTheIndexIsBounded: a flood beyond MaxEvents is dropped and counted,
// never grown into; events older than the retention leave it.
func TestTheIndexIsBounded(t *testing.T) {
	var lines []string
	for i := range 50 {
		lines = append(lines, event("patch", "alice", "", "kubectl/v1", "/x?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0.Add(time.Duration(i)*time.Second)))
	}
	events, err := audit.Decode(decode(t, true, lines...))
	if err != nil {
		t.Fatal(err)
	}
	x := audit.NewIndex(audit.Options{MaxEvents: 20, Retention: time.Hour, Keep: func(audit.Object) bool { return true }})
	if c := x.Add(events, t0.Add(time.Minute)); c.Kept != 20 || c.Dropped != 30 || x.Len() != 20 {
		t.Errorf("%+v, %d held; want 20 kept, 30 dropped", c, x.Len())
	}
	if c := x.Add(events[:1], t0.Add(2*time.Hour)); c.Kept != 0 || x.Len() != 0 {
		t.Errorf("after the retention: %+v, %d held", c, x.Len())
	}
}

// TestBadInputIsAnError: what is not audit events is an error, with where.
func TestBadInputIsAnError(t *testing.T) {
	if _, err := audit.Decode(strings.NewReader(`{"kind":"EventList","items":[{`)); err == nil || !strings.Contains(err.Error(), "audit EventList") {
		t.Errorf("a cut batch: %v", err)
	}
	if _, err := audit.Decode(strings.NewReader(event("patch", "a", "", "k/1", "/x", "deployments", "", "web", 200, t0) + "\nnot json\n")); err == nil || !strings.Contains(err.Error(), "event 2") {
		t.Errorf("a bad line: %v", err)
	}
}

// TestDriftIsAttributedFieldByField: each live-changed field of a drift
// gets the person whose write its manager's entry records, with the
// GitHub login app.yml maps them to (an OIDC name with its prefix too); a
// field whose manager wrote nothing the index holds stays unattributed.
func TestDriftIsAttributedFieldByField(t *testing.T) {
	events, err := audit.Decode(decode(t, true,
		event("patch", "admin", "oidc:alice@example.com", "kubectl/v1.37.2", "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale", "deployments", "scale", "web", 200, t0)))
	if err != nil {
		t.Fatal(err)
	}
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
}
