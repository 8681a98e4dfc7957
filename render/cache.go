package render

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
)

// cacheSalt changes whenever a change to driftback could change a render of the
// same inputs (the kustomize version, the child protocol).
const cacheSalt = "driftback-render/v1 kustomize-api/v0.21.2\n"

// Cache keeps renders keyed by the git blob ids of everything the overlay reads,
// so an overlay whose inputs did not change is never rendered twice. It holds at
// most a fixed number of bytes, dropping the least recently used renders first.
// It is safe for concurrent use; a nil *Cache caches nothing.
type Cache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // front = most recently used
	entries map[string]*list.Element

	hits, misses int64
}

type cacheEntry struct {
	key     string
	overlay Overlay
	size    int64
}

// NewCache returns a cache that holds at most maxBytes of rendered output.
func NewCache(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

// Stats returns how many lookups hit and missed.
func (c *Cache) Stats() (hits, misses int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Len returns the number of renders held.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func cacheKey(t *Tree, c *closure, origins bool, b BuildOptions) (string, error) {
	h := sha256.New()
	h.Write([]byte(cacheSalt))
	if origins {
		h.Write([]byte("origins\n"))
	}
	if b.LoadAnywhere {
		h.Write([]byte("load-anywhere\n"))
	}
	if b.WithoutArgoCDHooks {
		h.Write([]byte("without-argocd-hooks\n"))
	}
	if b.EnableHelm {
		fmt.Fprintf(h, "enable-helm %q %q\n", b.HelmKubeVersion, b.HelmAPIVersions)
	}
	h.Write([]byte(c.overlay + "\n"))
	for _, f := range c.files {
		id, err := t.Hash(f)
		if err != nil {
			return "", err
		}
		h.Write([]byte(f + "\x00" + id + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *Cache) get(key string) (*Overlay, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(el)
	o := el.Value.(*cacheEntry).overlay
	return &o, true
}

func (c *Cache) put(key string, o *Overlay) {
	if c == nil {
		return
	}
	size := int64(len(o.YAML)) + int64(len(key))
	for _, or := range o.Origins {
		size += int64(len(or.Path) + len(or.ConfiguredIn) + len(or.ConfiguredBy) + 48)
	}
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.size -= el.Value.(*cacheEntry).size
		c.order.Remove(el)
		delete(c.entries, key)
	}
	stored := *o
	stored.Cached = false
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, overlay: stored, size: size})
	c.size += size
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.size -= e.size
	}
}
