"""The original tests of intervals.py (the grader's copy)."""

import unittest

import intervals


class MergeTests(unittest.TestCase):
    def test_empty(self):
        self.assertEqual(intervals.merge([]), [])

    def test_disjoint_stay_apart(self):
        self.assertEqual(intervals.merge([(5, 6), (1, 3)]), [(1, 3), (5, 6)])

    def test_overlapping_merge(self):
        self.assertEqual(intervals.merge([(1, 4), (2, 6)]), [(1, 6)])

    def test_sharing_an_end_merge(self):
        self.assertEqual(intervals.merge([(1, 3), (3, 5)]), [(1, 5)])

    def test_nested_merge(self):
        self.assertEqual(intervals.merge([(1, 10), (3, 4), (10, 10)]), [(1, 10)])

    def test_adjacent_stay_apart(self):
        self.assertEqual(intervals.merge([(1, 2), (3, 4)]), [(1, 2), (3, 4)])

    def test_empty_interval_is_refused(self):
        with self.assertRaises(ValueError):
            intervals.merge([(4, 3)])


class CoverageTests(unittest.TestCase):
    def test_covered_counts_shared_points_once(self):
        self.assertEqual(intervals.covered([(1, 3), (3, 5), (9, 9)]), 6)

    def test_contains(self):
        self.assertTrue(intervals.contains([(1, 3), (3, 5)], 5))
        self.assertFalse(intervals.contains([(1, 3), (5, 6)], 4))


if __name__ == "__main__":
    unittest.main()
