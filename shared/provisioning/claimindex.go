package provisioning

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// claimIndex finds open NodeClaims in opening order whose headroom (claim.head: the most room
// any candidate type has left, per component) can still take a request. First-fit over every
// open claim for every pod is quadratic (10,000 pods × 2,000 claims); a segment tree over the
// heads' CPU, memory and pod slots skips the claims that cannot take the pod in O(log n).
//
// It also skips claims that hostname topology rules a pod carries surely refuse: each
// hostname group the rules use gets a bit (up to 64; rules beyond them are simply not
// pruned), set on a claim while the group counts a pod there ("occupied") or a pod whose
// required anti-affinity the group carries ("repels"). A subtree is skipped when some bit the
// pod needs clear is set on every claim in it (the AND of the claims' bits). hostCheck still
// decides; the bits only prune.
type claimIndex struct {
	n              int // leaves: a power of two ≥ len(claims)
	cpu, mem, pods []int64
	blocked        []uint64 // AND of the claims' bits
	claims         []*claim
	bits           hostBits
}

// hostBits assigns bit positions to hostname groups.
type hostBits struct {
	occupied map[*group]uint8 // bit set while g.hosts[claim] > 0
	repels   map[*group]uint8 // bit set while g.antiHosts[claim] > 0
	// occList and repList hold the same assignments for mask, which runs on every placement.
	occList, repList []groupBit
	n                uint8
}

type groupBit struct {
	g   *group
	bit uint8
}

func (h *hostBits) bit(m *map[*group]uint8, list *[]groupBit, g *group) (uint64, bool) {
	if *m == nil {
		*m = map[*group]uint8{}
	}
	if b, ok := (*m)[g]; ok {
		return 1 << b, true
	}
	if h.n >= 64 {
		return 0, false
	}
	(*m)[g] = h.n
	*list = append(*list, groupBit{g, h.n})
	h.n++
	return 1 << ((*m)[g]), true
}

// need returns the bits that refuse the pod: its required hostname anti-affinity and its
// hostname spreads with maxSkew 1 (a new node is an empty domain, so the minimum is 0 and a
// node already counting one matching pod is full), and the groups repelling it.
func (h *hostBits) need(p *podInfo) uint64 {
	var m uint64
	for _, c := range p.active {
		if c.g.key != corev1.LabelHostname {
			continue
		}
		if c.kind == kindAnti || (c.kind == kindSpread && c.maxSkew == 1) {
			if b, ok := h.bit(&h.occupied, &h.occList, c.g); ok {
				m |= b
			}
		}
	}
	for _, g := range p.invHost {
		if b, ok := h.bit(&h.repels, &h.repList, g); ok {
			m |= b
		}
	}
	return m
}

// mask returns the claim's current bits.
func (h *hostBits) mask(c *claim) uint64 {
	var m uint64
	for _, gb := range h.occList {
		if gb.g.hosts[c] > 0 {
			m |= 1 << gb.bit
		}
	}
	for _, gb := range h.repList {
		if gb.g.antiHosts[c] > 0 {
			m |= 1 << gb.bit
		}
	}
	return m
}

func (x *claimIndex) add(c *claim) {
	x.claims = append(x.claims, c)
	c.slot = len(x.claims)
	if len(x.claims) > x.n {
		x.n = max(2*x.n, 64)
		x.cpu, x.mem, x.pods = make([]int64, 2*x.n), make([]int64, 2*x.n), make([]int64, 2*x.n)
		x.blocked = make([]uint64, 2*x.n)
		for i := range x.cpu {
			x.cpu[i], x.mem[i], x.pods[i] = math.MinInt64, math.MinInt64, math.MinInt64
			x.blocked[i] = ^uint64(0)
		}
		for i, cl := range x.claims {
			x.cpu[x.n+i], x.mem[x.n+i], x.pods[x.n+i] = cl.head.MilliCPU, cl.head.Memory, cl.head.Pods
			x.blocked[x.n+i] = x.bits.mask(cl)
		}
		for i := x.n - 1; i >= 1; i-- {
			x.pull(i)
		}
		return
	}
	x.update(c)
}

func (x *claimIndex) pull(i int) {
	x.cpu[i] = max(x.cpu[2*i], x.cpu[2*i+1])
	x.mem[i] = max(x.mem[2*i], x.mem[2*i+1])
	x.pods[i] = max(x.pods[2*i], x.pods[2*i+1])
	x.blocked[i] = x.blocked[2*i] & x.blocked[2*i+1]
}

// update records a change of c's head (no-op for claims not in the index).
func (x *claimIndex) update(c *claim) {
	if c.slot == 0 || c.slot > len(x.claims) || x.claims[c.slot-1] != c {
		return
	}
	i := x.n + c.slot - 1
	x.cpu[i], x.mem[i], x.pods[i] = c.head.MilliCPU, c.head.Memory, c.head.Pods
	x.blocked[i] = x.bits.mask(c)
	for i /= 2; i >= 1; i /= 2 {
		x.pull(i)
	}
}

// remove takes c out of the search until update puts it back (its slot stays).
func (x *claimIndex) remove(c *claim) {
	if c.slot == 0 || c.slot > len(x.claims) || x.claims[c.slot-1] != c {
		return
	}
	i := x.n + c.slot - 1
	x.cpu[i], x.mem[i], x.pods[i] = math.MinInt64, math.MinInt64, math.MinInt64
	x.blocked[i] = ^uint64(0)
	for i /= 2; i >= 1; i /= 2 {
		x.pull(i)
	}
}

// each calls try, in claim order, on every claim whose head holds r's CPU, memory and pod
// slots and whose bits do not surely refuse a pod needing need clear, until try returns true;
// it reports whether one did.
func (x *claimIndex) each(r scheduling.Resources, need uint64, try func(*claim) bool) bool {
	if x.n == 0 {
		return false
	}
	return x.walk(1, 0, x.n, r, need, try)
}

func (x *claimIndex) walk(node, lo, hi int, r scheduling.Resources, need uint64, try func(*claim) bool) bool {
	if lo >= len(x.claims) || x.cpu[node] < r.MilliCPU || x.mem[node] < r.Memory || x.pods[node] < r.Pods || x.blocked[node]&need != 0 {
		return false
	}
	if hi-lo == 1 {
		return try(x.claims[lo])
	}
	mid := (lo + hi) / 2
	return x.walk(2*node, lo, mid, r, need, try) || x.walk(2*node+1, mid, hi, r, need, try)
}
