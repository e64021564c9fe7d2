import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import intervals


class MergeTest(unittest.TestCase):
    def test_merge_overlapping(self):
        self.assertEqual(intervals.merge([(2, 6), (1, 4)]), [(1, 6)])

    def test_coverage(self):
        # (1, 3) and (3, 5) share the point 3: 1..5 is five integers.
        self.assertEqual(intervals.covered([(1, 3), (3, 5)]), 5)


if __name__ == "__main__":
    unittest.main()
