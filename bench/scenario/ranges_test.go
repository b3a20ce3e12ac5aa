package scenario

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeCell(t *testing.T) {
	assert.Equal(t, "deadline (this)", mergeCell([]string{"deadline (this)", "deadline (this)"}))
	assert.Equal(t, "592–604", mergeCell([]string{"604", "592", "600"}))
	assert.Equal(t, "1.15–1.17", mergeCell([]string{"1.17", "1.15"}))
	assert.Equal(t, "1, 1–2", mergeCell([]string{"1, 1", "1, 2"}))
	assert.Equal(t, "18–20/20", mergeCell([]string{"20/20", "18/20"}))
	assert.Equal(t, "max -21 to -19 ms", mergeCell([]string{"max -19 ms", "max -21 ms"}))
	assert.Equal(t, "9.80–10 ms", mergeCell([]string{"9.80 ms", "10 ms", "9.80 ms"}))
	assert.Equal(t, "1 (1) / 2", mergeCell([]string{"1 (1)", "2"}), "different texts around the figures")
	assert.Equal(t, "0.34–4.83 ms", mergeCell([]string{"4.83 ms", "0.34 ms"}))
	assert.Equal(t, "goal: met / goal: **missed**", mergeCell([]string{"goal: met", "goal: **missed**", "goal: met"}))
	assert.Equal(t, "requests per run -0.004 to +0.000", mergeCell([]string{"requests per run -0.004", "requests per run +0.000"}), "a signed zero is a figure too")
	assert.Equal(t, "failsafe-go v0.9.8", mergeCell([]string{"failsafe-go v0.9.8", "failsafe-go v0.9.8"}))
}

func TestMergeRanges(t *testing.T) {
	a := Table{Title: "T", Header: []string{"lib", "ns"}, Rows: [][]string{{"x", "10"}, {"y", "20"}}, Notes: []string{"ratio 1.2"}}
	b := Table{Title: "T", Header: []string{"lib", "ns"}, Rows: [][]string{{"x", "12"}, {"y", "20"}}, Notes: []string{"ratio 1.3"}}
	got, err := MergeRanges([][]Table{{a}, {b}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, [][]string{{"x", "10–12"}, {"y", "20"}}, got[0].Rows)
	assert.Equal(t, []string{"ratio 1.2–1.3"}, got[0].Notes)

	_, err = MergeRanges([][]Table{{a}, {a, b}})
	assert.ErrorContains(t, err, "run 2 has 2 tables")
	c := b
	c.Rows = c.Rows[:1]
	_, err = MergeRanges([][]Table{{a}, {c}})
	assert.ErrorContains(t, err, "shape")
	got, err = MergeRanges(nil)
	assert.NoError(t, err)
	assert.Empty(t, got)
}
