package console

// onlyPools keeps the series of the pools the signed-in token may see
// (visible: the pools the API listed for it). The history sampler counts
// every pool's sessions from the store; a token scoped to host pools
// must not learn of the others from the chart.
func onlyPools(all []series, visible map[string]int) []series {
	out := all[:0:0]
	for _, s := range all {
		if _, ok := visible[s.Name]; ok {
			out = append(out, s)
		}
	}
	return out
}
