// Package lru is a cache of values bounded by their size in bytes, the
// least recently used evicted first. It is safe for concurrent use.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps values up to Max bytes in all.
type Cache[V any] struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of *entry[V], most recent first
	entries map[string]*list.Element
	hits    int64
}

type entry[V any] struct {
	key  string
	v    V
	size int64
}

// New is a cache of at most max bytes.
func New[V any](max int64) *Cache[V] {
	return &Cache[V]{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

// Get is the value kept under key, marked recently used.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.hits++
	c.order.MoveToFront(e)
	return e.Value.(*entry[V]).v, true
}

// Add keeps v, of size bytes, under key, evicting the least recently used
// values past the bound. A value larger than the whole bound, or a key
// already kept, is not added.
func (c *Cache[V]) Add(key string, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok || size > c.max {
		return
	}
	c.entries[key] = c.order.PushFront(&entry[V]{key: key, v: v, size: size})
	for c.size += size; c.size > c.max; {
		last := c.order.Back()
		old := last.Value.(*entry[V])
		c.order.Remove(last)
		delete(c.entries, old.key)
		c.size -= old.size
	}
}

// Hits is how many gets found their value.
func (c *Cache[V]) Hits() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}
