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
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

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
	// ImpersonatedBy is the user the apiserver authenticated, when they
	// acted as User.
	ImpersonatedBy string `json:"impersonatedBy,omitempty"`
	// UserAgent is the client ("kubectl/v1.37.2 (linux/amd64) …").
	UserAgent string `json:"userAgent,omitempty"`
	// Verb is the request's: create, update, patch.
	Verb string `json:"verb"`
	// Time is when the apiserver completed the request.
	Time time.Time `json:"time"`
}

// Client is the program of a user agent: "kubectl" of "kubectl/v1.37.2
// (linux/amd64) kubernetes/abc". It is the name the apiserver gives the
// field manager of a request that names none (prefixFromUserAgent in
// k8s.io/apiserver's handlers): what comes before the first "/", without
// characters that do not print, in at most 128 bytes.
func (w Who) Client() string {
	c, _, _ := strings.Cut(w.UserAgent, "/")
	var b strings.Builder
	for _, r := range c {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > 128 { // validation.FieldManagerMaxLength
			break
		}
		b.WriteRune(r)
	}
	return b.String()
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
	received     time.Time // when the apiserver received the request
	subresource  string
	fieldManager string // the request's fieldManager, when it named one
	// matched says a change was attributed to it (counted once).
	matched bool
}

// Index holds the attribution of recent writes, by object.
type Index struct {
	opts Options

	mu       sync.Mutex
	byObject map[Object][]record
	// order is every record's object, oldest first: at the bound, the
	// oldest record goes (each object's records are in arrival order, so
	// the oldest is the first of its object's).
	order []Object
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
	// reads, dry runs, failed requests, stages before the response.
	Ignored int
	// Dropped are older events let go to keep the bound.
	Dropped int
}

// writes are the verbs that change an object.
var writes = []string{"create", "update", "patch"}

// Add keeps what attribution needs of events; now is the current time
// (events older than the retention are not kept). At the bound, the oldest
// events go: a flood of writes costs the index its oldest history, never
// what comes next.
func (x *Index) Add(events []auditv1.Event, now time.Time) Counts {
	var c Counts
	x.mu.Lock()
	defer x.mu.Unlock()
	c.Dropped += x.expire(now)
	for i := range events {
		e := &events[i]
		ref := e.ObjectRef
		if e.Stage != auditv1.StageResponseComplete || !slices.Contains(writes, e.Verb) || ref == nil || ref.Name == "" ||
			(e.ResponseStatus != nil && (e.ResponseStatus.Code < 200 || e.ResponseStatus.Code > 299)) || dryRun(e.RequestURI) ||
			x.opts.Keep == nil || !x.opts.Keep(Object{ref.APIGroup, ref.Resource, ref.Namespace, ref.Name}) {
			c.Ignored++
			continue
		}
		at := e.StageTimestamp.Time
		if now.Sub(at) > x.opts.Retention {
			c.Ignored++
			continue
		}
		for len(x.order) >= x.opts.MaxEvents {
			x.evictOldest()
			c.Dropped++
		}
		user, by := e.User, ""
		if e.ImpersonatedUser != nil {
			user, by = *e.ImpersonatedUser, e.User.Username // the person acted as, and who acted
		}
		received := e.RequestReceivedTimestamp.Time
		if received.IsZero() {
			received = at
		}
		r := record{who: Who{User: user.Username, Groups: slices.Clone(user.Groups[:min(len(user.Groups), maxGroups)]), ImpersonatedBy: by,
			UserAgent: e.UserAgent, Verb: e.Verb, Time: at.UTC()},
			received: received.UTC(), subresource: ref.Subresource, fieldManager: fieldManager(e.RequestURI)}
		k := Object{ref.APIGroup, ref.Resource, ref.Namespace, ref.Name}
		x.byObject[k] = append(x.byObject[k], r)
		x.order = append(x.order, k)
		c.Kept++
	}
	return c
}

// maxGroups bounds the groups kept of a user.
const maxGroups = 32

// evictOldest lets the oldest record go.
func (x *Index) evictOldest() {
	k := x.order[0]
	x.order = x.order[1:]
	if rs := x.byObject[k]; len(rs) <= 1 {
		delete(x.byObject, k)
	} else {
		x.byObject[k] = rs[1:]
	}
}

// expire lets go what is older than the retention (the oldest first), and
// says how many.
func (x *Index) expire(now time.Time) int {
	n := 0
	for len(x.order) > 0 {
		rs := x.byObject[x.order[0]]
		if len(rs) > 0 && now.Sub(rs[0].who.Time) <= x.opts.Retention {
			break
		}
		x.evictOldest()
		n++
	}
	return n
}

// Len is how many events the index holds.
func (x *Index) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.order)
}

// truncated ends a user agent the apiserver cut to fit the audit log
// (k8s.io/apiserver/pkg/audit's maxUserAgentLength).
const truncated = "...TRUNCATED"

// slack is how far a request's times may be from the time its field
// manager's entry records: managedFields hold whole seconds, stamped while
// the request runs.
const slack = time.Second

// Attribute finds who made the write that a field manager (manager,
// through subresource, at managed: its managedFields entry's time) last
// made to an object: a write of that object through that subresource, by
// that manager (the request's fieldManager, else the client its user agent
// names, as the apiserver names a manager for a request that names none),
// running at that time (received at or before it, completed at or after
// it, within a second). A zero managed time (an entry without one) takes
// that manager's latest write. ok is false when no event matches, and when
// another person wrote through the same manager meanwhile (one manager
// name, several people: which of them set the field is not known): the
// change stays the manager's, unattributed, never someone else's.
func (x *Index) Attribute(o Object, manager, subresource string, managed time.Time) (Who, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.find(o, manager, subresource, managed)
	if r == nil {
		return Who{}, false
	}
	w := r.who
	w.Groups = slices.Clone(w.Groups)
	return w, true
}

// find is Attribute's match, with x.mu held.
func (x *Index) find(o Object, manager, subresource string, managed time.Time) *record {
	var best *record
	users := map[string]bool{}
	for i := range x.byObject[o] {
		r := &x.byObject[o][i]
		if r.subresource != subresource {
			continue
		}
		// A user agent the audit log cut before its first "/" hides the
		// manager: its writer may be this manager's, so it may not be
		// someone else's field, but it is never named.
		hidden := false
		if r.fieldManager == "" && strings.HasSuffix(r.who.UserAgent, truncated) && !strings.Contains(r.who.UserAgent, "/") {
			// What is left of it may begin the manager's name: then
			// its writer may be that manager's.
			seen := Who{UserAgent: strings.TrimSuffix(r.who.UserAgent, truncated)}.Client()
			hidden = len(seen) < 128 && strings.HasPrefix(manager, seen)
		}
		if m := r.fieldManager; !hidden && (m != "" && m != manager || m == "" && r.who.Client() != manager) {
			continue
		}
		if !managed.IsZero() && r.received.Truncate(time.Second).After(managed.Add(slack)) {
			continue // after the entry's write
		}
		users[r.who.User] = true
		if hidden {
			continue
		}
		if !managed.IsZero() && r.who.Time.Before(managed.Add(-slack)) {
			continue // an earlier write
		}
		if best == nil || r.who.Time.After(best.who.Time) {
			best = r
		}
	}
	if best == nil || len(users) > 1 {
		return nil
	}
	return best
}

// dryRun says a request only tried its write.
func dryRun(requestURI string) bool {
	u, err := url.Parse(requestURI)
	return err == nil && u.Query().Has("dryRun")
}

// fieldManager is the fieldManager a request's URI names.
func fieldManager(requestURI string) string {
	u, err := url.Parse(requestURI)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// DecodeList reads a batch of audit events as the webhook backend sends
// it: an EventList. Request and response bodies are dropped as they are
// read.
func DecodeList(r io.Reader) ([]auditv1.Event, error) {
	var list auditv1.EventList
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, fmt.Errorf("read the audit EventList: %w", err)
	}
	if list.Kind != "EventList" {
		return nil, fmt.Errorf("read the audit EventList: kind %q", list.Kind)
	}
	for i := range list.Items {
		list.Items[i].RequestObject, list.Items[i].ResponseObject = nil, nil
	}
	return list.Items, nil
}

// DecodeLines reads audit events as the log backend writes them: one
// Event a line. A line that is not one is skipped and counted (bad); its
// neighbours are read.
func DecodeLines(r io.Reader) (events []auditv1.Event, bad int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e auditv1.Event
		if err := json.Unmarshal(line, &e); err != nil || e.Kind != "Event" {
			bad++
			continue
		}
		e.RequestObject, e.ResponseObject = nil, nil
		events = append(events, e)
	}
	if sc.Err() != nil {
		bad++
	}
	return events, bad
}

// MaxLine bounds one line of a log backend's file.
const MaxLine = 1 << 20

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
	return &object.Person{User: w.User, Groups: slices.Clone(w.Groups), ImpersonatedBy: w.ImpersonatedBy, Client: w.Client(), Verb: w.Verb, Time: w.Time, Login: ids.Login(w.User)}
}

// AttributeChanges sets, on each live-changed field of changes, who made
// it (Field.By), where the index has the write its field manager's entry
// records. resource names a kind's resource ("deployments"; empty when the
// cluster serves no such kind). It returns how many events matched a
// change for the first time: each event is counted once, however often the
// drift it made is looked at.
func (x *Index) AttributeChanges(changes []drift.Change, resource func(group, kind string) string, ids Identities) int {
	x.mu.Lock()
	defer x.mu.Unlock()
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
			if r := x.find(o, f.Manager, f.Subresource, managed); r != nil {
				f.By = r.who.Person(ids)
				if !r.matched {
					r.matched = true
					n++
				}
			}
		}
	}
	return n
}
