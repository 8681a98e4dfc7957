package driftloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/metrics"
)

// Shards runs each cluster's drift loop in the one replica that holds that
// cluster's Lease. Every Lease is held with client-go's leader election:
//
//   - each replica holds a membership Lease of its own (<name>-member-<id>),
//     so the replicas alive are the membership Leases renewed within their
//     duration;
//   - each cluster has a Lease (<name>-<cluster>); a replica campaigns for
//     one only while it holds fewer than its share, ⌈clusters / replicas⌉,
//     and only while the Lease is free (never held, released, or expired);
//   - a replica holding more than its share (replicas joined) releases the
//     extra Leases, and another replica takes them at its next look.
//
// A replica that dies stops renewing; its Leases expire and the others take
// them within the Lease duration plus a retry period. client-go's election
// makes a leader stop when it cannot renew within the renew deadline, before
// its Lease can expire for anyone else: two replicas never hold a cluster at
// once.
type Shards struct {
	client   kubernetes.Interface
	le       config.LeaderElection
	id       string
	clusters []string
	log      *slog.Logger
	metrics  *metrics.Metrics
	run      func(ctx context.Context, cluster string)
	// crash, in tests, stops a replica without releasing its Leases, as a
	// killed process does.
	crash bool

	mu        sync.Mutex
	held      map[string]bool
	campaigns map[string]*campaign
	// share is this replica's share of the clusters at the last look.
	share int
	// holders are the replicas holding each cluster at the last look.
	holders map[string]string
}

// campaign is one election for a cluster's Lease, running or holding it.
type campaign struct{ cancel context.CancelFunc }

// NewShards prepares a replica's share of the clusters' drift loops. Its
// client may make, on its own, the requests the elections need: a renewal or
// a try of each Lease and one look at them all every retry period, twice
// over; client-go's default of 5 a second would delay renewals past the
// point where other replicas take a Lease for gone.
func NewShards(cfg *rest.Config, le config.LeaderElection, id string, clusters []string, log *slog.Logger, m *metrics.Metrics, run func(context.Context, string)) (*Shards, error) {
	cfg = rest.CopyConfig(cfg)
	perSecond := float32(len(clusters)+2) / float32(le.RetryPeriod.Seconds())
	cfg.QPS = max(cfg.QPS, 2*perSecond)
	cfg.Burst = max(cfg.Burst, int(4*perSecond)+10)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs := append([]string(nil), clusters...)
	sort.Strings(cs)
	return &Shards{client: client, le: le, id: id, clusters: cs, log: log, metrics: m, run: run,
		held: map[string]bool{}, campaigns: map[string]*campaign{}}, nil
}

// Held returns the clusters this replica holds, sorted.
func (s *Shards) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for c, ok := range s.held {
		if ok {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// Holder says which replica runs a cluster's drift loop: this one (here),
// or the one whose identity is id, as the last look at the Leases found;
// "" while none does.
func (s *Shards) Holder(cluster string) (id string, here bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[cluster] {
		return s.id, true
	}
	if h := s.holders[cluster]; h != s.id {
		return h, false
	}
	return "", false // its Lease still names this replica, which no longer runs it
}

// Run keeps this replica's membership and its share of the clusters until
// ctx ends.
func (s *Shards) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	mctx, stopMember := context.WithCancel(ctx)
	defer stopMember()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A membership lost to a slow renewal (a loaded apiserver or node)
		// is campaigned for again: a replica that stopped being a member
		// would never take a cluster again.
		for mctx.Err() == nil {
			s.elect(mctx, s.memberLease(), func(lctx context.Context) { <-lctx.Done() })
			select {
			case <-mctx.Done():
			case <-time.After(s.le.RetryPeriod):
			}
		}
	}()
	tick := time.NewTicker(s.le.RetryPeriod)
	defer tick.Stop()
	for {
		if err := s.balance(ctx, &wg); err != nil && ctx.Err() == nil {
			s.log.Warn("cannot read the drift loop's Leases; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for _, cp := range s.campaigns {
				cp.cancel()
			}
			s.mu.Unlock()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// balance takes free clusters up to this replica's share and releases what
// is beyond it.
func (s *Shards) balance(ctx context.Context, wg *sync.WaitGroup) error {
	leases, err := s.client.CoordinationV1().Leases(s.le.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	now := time.Now()
	pruneMembers(ctx, s.client, s.le, leases.Items, now)
	byName := map[string]*coordinationv1.Lease{}
	members := 0
	for i := range leases.Items {
		l := &leases.Items[i]
		byName[l.Name] = l
		if strings.HasPrefix(l.Name, s.le.Name+"-member-") && s.alive(l, now) {
			members++
		}
	}
	members = max(members, 1) // this replica, before its own Lease is written
	share := int(math.Ceil(float64(len(s.clusters)) / float64(members)))

	s.mu.Lock()
	defer s.mu.Unlock()
	s.share = share
	s.holders = map[string]string{}
	for _, c := range s.clusters {
		if l := byName[s.clusterLease(c)]; l != nil && s.alive(l, now) {
			s.holders[c] = holder(l)
		}
	}
	held := 0
	for _, c := range s.clusters {
		if s.held[c] {
			held++
		}
	}
	// Beyond the share: release the last held (in this replica's order).
	order := s.preference()
	for i := len(order) - 1; i >= 0 && held > share; i-- {
		c := order[i]
		if s.held[c] {
			s.log.Info("releasing a cluster: more replicas share the drift loop", "cluster", c, "share", share, "replicas", members)
			s.campaigns[c].cancel()
			s.held[c] = false
			held--
		}
	}
	// A campaign for a Lease someone else holds and renews waits for
	// nothing: stop it.
	for c, cp := range s.campaigns {
		if s.held[c] {
			continue
		}
		if l := byName[s.clusterLease(c)]; l != nil && s.alive(l, now) && holder(l) != s.id {
			cp.cancel()
			delete(s.campaigns, c)
		}
	}
	// A free Lease is campaigned for up to the share. A Lease whose holder
	// stopped renewing is campaigned for whatever the share: client-go takes
	// an abandoned Lease only a Lease duration after a candidate first sees
	// it, so candidates must be looking before it expires. A win beyond the
	// share is handed back at once, without running the loop (setHeld), and
	// is then free for the replicas under their share.
	if !s.settled(byName, now) {
		return nil
	}
	for _, c := range order {
		if _, running := s.campaigns[c]; running {
			continue
		}
		l := byName[s.clusterLease(c)]
		switch {
		case l != nil && s.alive(l, now) && holder(l) != s.id:
			continue // held and renewed by another replica
		case (l == nil || holder(l) == "") && held >= share:
			continue // free: left to the replicas under their share
		case l != nil && holder(l) == s.id && held >= share:
			// Still ours from a win handed back without a release (a
			// failed one): campaigning would renew it with no loop
			// running, and the others would wait for it forever. Left
			// to expire, it goes to a replica under its share.
			continue
		}
		held++ // counted as taken, so a look takes no more than the share
		cctx, cancel := context.WithCancel(ctx)
		cp := &campaign{cancel: cancel}
		s.campaigns[c] = cp
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			s.elect(cctx, s.clusterLease(c), func(lctx context.Context) {
				if !s.setHeld(c, cp, true) {
					cancel() // over this replica's share by the time it won: hand it back
					return
				}
				s.log.Info("holding a cluster: its drift loop runs here", "cluster", c, "identity", s.id)
				s.run(lctx, c)
			})
			s.setHeld(c, cp, false)
			s.mu.Lock()
			if s.campaigns[c] == cp {
				delete(s.campaigns, c)
			}
			s.mu.Unlock()
		}()
	}
	return nil
}

// settled says this replica's membership has been visible long enough for
// the shares to count it and the replicas that started with it: before that,
// it takes no cluster (a replica alone at first would take them all, only to
// hand most back a moment later).
func (s *Shards) settled(byName map[string]*coordinationv1.Lease, now time.Time) bool {
	l := byName[s.memberLease()]
	if l == nil || holder(l) != s.id || l.Spec.AcquireTime == nil {
		return false
	}
	return now.Sub(l.Spec.AcquireTime.Time) >= 2*s.le.RetryPeriod
}

// preference orders the clusters for this replica: by a hash of the replica
// and the cluster (rendezvous hashing), so replicas prefer different
// clusters and rarely race for one.
func (s *Shards) preference() []string {
	order := append([]string(nil), s.clusters...)
	rank := func(c string) string {
		h := sha256.Sum256([]byte(s.id + "\x00" + c))
		return hex.EncodeToString(h[:8])
	}
	sort.Slice(order, func(i, j int) bool { return rank(order[i]) < rank(order[j]) })
	return order
}

// setHeld records that campaign cp holds cluster c, or no longer does; it
// reports false when cp was stopped meanwhile, or when holding c would put
// this replica over its share (nothing to hold then).
func (s *Shards) setHeld(c string, cp *campaign, on bool) bool {
	s.mu.Lock()
	current := s.campaigns[c] == cp
	was := s.held[c]
	if on && current {
		held := 0
		for _, h := range s.held {
			if h {
				held++
			}
		}
		current = held < s.share
	}
	if current {
		s.held[c] = on
	}
	s.mu.Unlock()
	if !current && on {
		return false
	}
	s.metrics.SetHeld(c, on)
	if !on && was {
		s.log.Info("not holding a cluster", "cluster", c, "identity", s.id)
	}
	return true
}

// elect campaigns for one Lease with client-go's leader election and runs fn
// while it is held; it returns when ctx ends or the Lease is lost.
func (s *Shards) elect(ctx context.Context, name string, fn func(context.Context)) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.le.Namespace, Name: name},
		Client:     s.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.id},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: name, ReleaseOnCancel: !s.crash,
		LeaseDuration: s.le.LeaseDuration, RenewDeadline: s.le.RenewDeadline, RetryPeriod: s.le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: fn, OnStoppedLeading: func() {}},
	})
	if err != nil {
		s.log.Error("leader election", "lease", name, "err", err)
		return
	}
	elector.Run(ctx)
}

func (s *Shards) memberLease() string { return s.le.Name + "-member-" + leaseSuffix(s.id) }

func (s *Shards) clusterLease(c string) string { return s.le.Name + "-" + leaseSuffix(c) }

// leaseSuffix turns a name into a valid part of a Lease name: lower-case
// letters, digits and dashes, with a hash when anything was changed or cut.
func leaseSuffix(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out != name || len(out) > 40 {
		h := sha256.Sum256([]byte(name))
		out = strings.Trim(out[:min(len(out), 40)], "-") + "-" + hex.EncodeToString(h[:4])
	}
	return strings.TrimPrefix(out, "-")
}

// alive says a Lease's holder renews it: a holder renews every retry period,
// so one that missed two is taken for gone. Such a Lease is campaigned for
// at once (client-go still waits out its duration before taking it), and a
// membership Lease left so no longer counts toward the shares.
func (s *Shards) alive(l *coordinationv1.Lease, now time.Time) bool {
	return fresh(l, now) && now.Sub(l.Spec.RenewTime.Time) <= 2*s.le.RetryPeriod+time.Second
}

// fresh says a Lease is held and renewed within its duration.
func fresh(l *coordinationv1.Lease, now time.Time) bool {
	if holder(l) == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// pruneMembers deletes membership Leases expired long ago (replicas that
// died); a live replica's Lease is never touched.
func pruneMembers(ctx context.Context, client kubernetes.Interface, le config.LeaderElection, leases []coordinationv1.Lease, now time.Time) {
	for i := range leases {
		l := &leases[i]
		if !strings.HasPrefix(l.Name, le.Name+"-member-") || l.Spec.RenewTime == nil {
			continue
		}
		if now.Sub(l.Spec.RenewTime.Time) > 10*le.LeaseDuration+time.Minute {
			// Only the Lease as read: a replica that came back meanwhile
			// keeps it. A failure is tried again at the next look.
			_ = client.CoordinationV1().Leases(le.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
		}
	}
}
