// Package audit attributes a live change to the person who made it, from
// the apiserver's audit events (audit.k8s.io/v1, as its webhook and log
// backends write them): the user, their groups and the client, at the time
// the change's field manager wrote it.
//
// An Index keeps, of each event, only what attribution needs (who, with
// what client, which object and subresource, when): never a request or a
// response body. It is bounded in events and in age, and a batch beyond its
// bound is dropped, counted, rather than grown into.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// Who made a change, as the audit log says.
type Who struct {
	// User is the person (the impersonated user, when someone acted as
	// another): "alice@example.com", "system:serviceaccount:ops:deployer".
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// UserAgent is the client ("kubectl/v1.37.2 (linux/amd64) …").
	UserAgent string `json:"userAgent,omitempty"`
	// Verb is the request's: create, update, patch.
	Verb string `json:"verb"`
	// Time is when the apiserver completed the request.
	Time time.Time `json:"time"`
}

// Client is the program of a user agent: "kubectl" of "kubectl/v1.37.2
// (linux/amd64) kubernetes/abc".
func (w Who) Client() string {
	c, _, _ := strings.Cut(w.UserAgent, "/")
	return strings.TrimSpace(c)
}

// Object names an object as an audit event does: its API group, resource
// (plural), namespace and name.
type Object struct {
	Group, Resource, Namespace, Name string
}

// Options bound an Index and choose what it keeps.
type Options struct {
	// Retention is how long an event is kept; 0 is 24 hours.
	Retention time.Duration
	// MaxEvents is how many events are kept at once; 0 is 100,000.
	MaxEvents int
	// Keep says whether events of an object are kept (the objects of the
	// targets driftback watches); nil keeps none.
	Keep func(Object) bool
}

// record is what an event leaves in the index.
type record struct {
	who          Who
	subresource  string
	fieldManager string // the request's fieldManager, when it named one
}

// Index holds the attribution of recent writes, by object.
type Index struct {
	opts Options

	mu       sync.Mutex
	byObject map[Object][]record
	count    int
}

// NewIndex returns an empty index.
func NewIndex(o Options) *Index {
	if o.Retention == 0 {
		o.Retention = 24 * time.Hour
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = 100_000
	}
	return &Index{opts: o, byObject: map[Object][]record{}}
}

// Counts says what Add did with a batch.
type Counts struct {
	// Kept are events of watched objects' writes, kept.
	Kept int
	// Ignored are events attribution has no use for: other objects,
	// reads, failed requests, stages before the response.
	Ignored int
	// Dropped are events that would have been kept but for the bound.
	Dropped int
}

// writes are the verbs that change an object.
var writes = []string{"create", "update", "patch"}

// Add keeps what attribution needs of events; now is the current time
// (events older than the retention are not kept).
func (x *Index) Add(events []auditv1.Event, now time.Time) Counts {
	var c Counts
	x.mu.Lock()
	defer x.mu.Unlock()
	x.expire(now)
	for i := range events {
		e := &events[i]
		ref := e.ObjectRef
		if e.Stage != auditv1.StageResponseComplete || !slices.Contains(writes, e.Verb) || ref == nil || ref.Name == "" ||
			(e.ResponseStatus != nil && (e.ResponseStatus.Code < 200 || e.ResponseStatus.Code > 299)) ||
			x.opts.Keep == nil || !x.opts.Keep(Object{ref.APIGroup, ref.Resource, ref.Namespace, ref.Name}) {
			c.Ignored++
			continue
		}
		at := e.StageTimestamp.Time
		if now.Sub(at) > x.opts.Retention {
			c.Ignored++
			continue
		}
		if x.count >= x.opts.MaxEvents {
			c.Dropped++
			continue
		}
		user := e.User
		if e.ImpersonatedUser != nil {
			user = *e.ImpersonatedUser // the person acted as
		}
		r := record{who: Who{User: user.Username, Groups: slices.Clone(user.Groups), UserAgent: e.UserAgent, Verb: e.Verb, Time: at.UTC()},
			subresource: ref.Subresource, fieldManager: fieldManager(e.RequestURI)}
		k := Object{ref.APIGroup, ref.Resource, ref.Namespace, ref.Name}
		x.byObject[k] = append(x.byObject[k], r)
		x.count++
		c.Kept++
	}
	return c
}

// expire drops what is older than the retention.
func (x *Index) expire(now time.Time) {
	for k, rs := range x.byObject {
		kept := rs[:0]
		for _, r := range rs {
			if now.Sub(r.who.Time) <= x.opts.Retention {
				kept = append(kept, r)
			}
		}
		x.count -= len(rs) - len(kept)
		if len(kept) == 0 {
			delete(x.byObject, k)
		} else {
			x.byObject[k] = kept
		}
	}
}

// Len is how many events the index holds.
func (x *Index) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.count
}

// slack is how far an event's time may be from the time its field
// manager's entry records: managedFields hold whole seconds, written while
// the request runs; the event is stamped when it completes.
const slack = 2 * time.Second

// Attribute finds who made the write that a field manager (manager,
// through subresource, at managed: its managedFields entry's time) last
// made to an object: the latest write of that object through that
// subresource, within two seconds of that time, by that manager (the
// request's fieldManager, else the client its user agent names, as the
// apiserver names a manager for a request that names none). A zero
// managed time (an entry without one) takes that manager's latest write.
// ok is false when no event matches: the change stays the manager's,
// unattributed.
func (x *Index) Attribute(o Object, manager, subresource string, managed time.Time) (Who, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best *record
	for i := range x.byObject[o] {
		r := &x.byObject[o][i]
		if r.subresource != subresource || !managed.IsZero() && (r.who.Time.Before(managed.Add(-slack)) || r.who.Time.After(managed.Add(slack))) {
			continue
		}
		if m := r.fieldManager; m != "" && m != manager || m == "" && r.who.Client() != manager {
			continue
		}
		if best == nil || r.who.Time.After(best.who.Time) {
			best = r
		}
	}
	if best == nil {
		return Who{}, false
	}
	w := best.who
	w.Groups = slices.Clone(w.Groups)
	return w, true
}

// fieldManager is the fieldManager a request's URI names.
func fieldManager(requestURI string) string {
	u, err := url.Parse(requestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// Decode reads audit events as the apiserver writes them: an EventList (the
// webhook backend's batches) or one Event a line (the log backend's JSON
// lines). Request and response bodies are dropped as they are read.
func Decode(r io.Reader) ([]auditv1.Event, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(4096)
	if bytes.Contains(head, []byte(`"EventList"`)) {
		var list auditv1.EventList
		if err := json.NewDecoder(br).Decode(&list); err != nil {
			return nil, fmt.Errorf("read the audit EventList: %w", err)
		}
		for i := range list.Items {
			list.Items[i].RequestObject, list.Items[i].ResponseObject = nil, nil
		}
		return list.Items, nil
	}
	var out []auditv1.Event
	dec := json.NewDecoder(br)
	for n := 1; ; n++ {
		var e auditv1.Event
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read audit event %d: %w", n, err)
		}
		e.RequestObject, e.ResponseObject = nil, nil
		out = append(out, e)
	}
}

// Identities map the cluster's names for people to GitHub logins, as
// app.yml gives them.
type Identities struct {
	// Users maps a cluster user name ("alice@example.com", or the OIDC
	// claim the apiserver uses as the name) to a login.
	Users map[string]string
	// Prefix is what the apiserver puts before OIDC user names
	// (--oidc-username-prefix, "oidc:"): taken off before Users is read.
	Prefix string
}

// Login is the GitHub login of a cluster user; empty when none is mapped.
func (i Identities) Login(user string) string {
	if l, ok := i.Users[user]; ok {
		return l
	}
	if i.Prefix != "" {
		if rest, ok := strings.CutPrefix(user, i.Prefix); ok {
			return i.Users[rest]
		}
	}
	return ""
}

// Person is who the index says made a change, as a drift report names
// them, with their mapped login.
func (w Who) Person(ids Identities) *object.Person {
	return &object.Person{User: w.User, Groups: slices.Clone(w.Groups), Client: w.Client(), Verb: w.Verb, Time: w.Time, Login: ids.Login(w.User)}
}

// AttributeChanges sets, on each live-changed field of changes, who made
// it (Field.By), where the index has the write its field manager's entry
// records. resource names a kind's resource ("deployments"; empty when the
// cluster serves no such kind). It returns how many fields it attributed.
func (x *Index) AttributeChanges(changes []drift.Change, resource func(group, kind string) string, ids Identities) int {
	n := 0
	for i := range changes {
		ch := &changes[i]
		ref := ch.Ref()
		res := resource(ref.Group, ref.Kind)
		if res == "" {
			continue
		}
		o := Object{Group: ref.Group, Resource: res, Namespace: ref.Namespace, Name: ref.Name}
		for j := range ch.Fields {
			f := &ch.Fields[j]
			if f.Manager == "" {
				continue
			}
			var managed time.Time
			if f.Time != nil {
				managed = *f.Time
			}
			if who, ok := x.Attribute(o, f.Manager, f.Subresource, managed); ok {
				f.By = who.Person(ids)
				n++
			}
		}
	}
	return n
}
