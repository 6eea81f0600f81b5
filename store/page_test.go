package store

import (
	"fmt"
	"slices"
	"testing"
)

// TestFillPage reads ten rows through a reader that returns pages of at
// most `short` rows and drops the rows `drop` rejects.
func TestFillPage(t *testing.T) {
	cases := []struct {
		name  string
		limit int
		short int
		drop  func(row int) bool
		// want are the pages FillPage returns, from the start to the end.
		want [][]int
	}{
		{name: "full pages", limit: 4, short: 4, want: [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}},
		{name: "short pages are filled", limit: 4, short: 3, want: [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}},
		{name: "dropped rows are made up", limit: 3, short: 10, drop: func(row int) bool { return row%2 == 0 },
			want: [][]int{{1, 3, 5}, {7, 9}}},
		{name: "every row dropped", limit: 3, short: 2, drop: func(int) bool { return true }, want: [][]int{nil}},
		{name: "the last page exactly full", limit: 5, short: 5, want: [][]int{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			read := func(resume *Cursor, want int) (Page, error) {
				from := 0
				if resume != nil {
					fmt.Sscan(resume.RowKey, &from)
				}
				var page Page
				n := min(want, tc.short)
				for row := from; row < from+n && row < 10; row++ {
					if tc.drop == nil || !tc.drop(row) {
						page.Entities = append(page.Entities, Entity{RowKey: fmt.Sprint(row)})
					}
				}
				if from+n < 10 {
					page.Next = &Cursor{RowKey: fmt.Sprint(from + n)}
				}
				return page, nil
			}
			var got [][]int
			var resume *Cursor
			for range 20 {
				page, err := FillPage(tc.limit, resume, read)
				if err != nil {
					t.Fatal(err)
				}
				var rows []int
				for _, e := range page.Entities {
					var row int
					fmt.Sscan(e.RowKey, &row)
					rows = append(rows, row)
				}
				got = append(got, rows)
				if resume = page.Next; resume == nil {
					break
				}
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("pages %v, want %v", got, tc.want)
			}
		})
	}
}
