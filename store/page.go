package store

// FillPage reads pages through read, from resume on, until it holds limit
// (1 to MaxPageSize) entities or nothing remains, and returns them with the
// cursor of what follows (nil when nothing does). A backend may return short
// pages, even empty ones, while more remain; a caller that promises full
// pages but the last fills them here. read gets the cursor to resume at and
// how many entities are still wanted; it may drop entities from what it
// reads, and FillPage reads on.
func FillPage(limit int, resume *Cursor, read func(resume *Cursor, want int) (Page, error)) (Page, error) {
	var out Page
	for {
		page, err := read(resume, limit-len(out.Entities))
		if err != nil {
			return Page{}, err
		}
		out.Entities = append(out.Entities, page.Entities...)
		if page.Next == nil || len(out.Entities) >= limit {
			out.Next = page.Next
			return out, nil
		}
		resume = page.Next
	}
}
