import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import datetime

import billing


class BillingTest(unittest.TestCase):
    def test_month_end(self):
        self.assertEqual(billing.add_months(datetime.date(2024, 1, 31), 1), datetime.date(2024, 2, 29))

    def test_reported_schedule(self):
        # The customer's complaint: the December invoice was dated 2024.
        self.assertEqual(
            billing.billing_dates(datetime.date(2023, 10, 31), 3),
            [datetime.date(2023, 10, 31), datetime.date(2023, 11, 30), datetime.date(2023, 12, 31)],
        )


if __name__ == "__main__":
    unittest.main()
