"""The original tests of daycount.py and billing.py (the grader's copy)."""

import datetime
import unittest

import billing
import daycount

D = datetime.date


class DaycountTests(unittest.TestCase):
    def test_leap_years(self):
        for year, leap in [(2024, True), (2023, False), (1900, False), (2000, True), (2100, False), (2400, True)]:
            self.assertEqual(daycount.is_leap(year), leap, year)

    def test_days_in_february(self):
        self.assertEqual(daycount.days_in_month(2000, 2), 29)
        self.assertEqual(daycount.days_in_month(1900, 2), 28)

    def test_days_in_other_months(self):
        self.assertEqual([daycount.days_in_month(2023, m) for m in range(1, 13)],
                         [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])

    def test_no_month_13(self):
        with self.assertRaises(ValueError):
            daycount.days_in_month(2024, 13)


class AddMonthsTests(unittest.TestCase):
    def test_same_day_next_month(self):
        self.assertEqual(billing.add_months(D(2024, 1, 15), 1), D(2024, 2, 15))

    def test_end_of_month_moves_back(self):
        self.assertEqual(billing.add_months(D(2024, 1, 31), 1), D(2024, 2, 29))
        self.assertEqual(billing.add_months(D(2023, 1, 31), 1), D(2023, 2, 28))

    def test_into_december(self):
        self.assertEqual(billing.add_months(D(2023, 11, 30), 1), D(2023, 12, 30))
        self.assertEqual(billing.add_months(D(2023, 1, 5), 11), D(2023, 12, 5))

    def test_across_the_year(self):
        self.assertEqual(billing.add_months(D(2023, 12, 15), 1), D(2024, 1, 15))
        self.assertEqual(billing.add_months(D(2023, 10, 31), 4), D(2024, 2, 29))
        self.assertEqual(billing.add_months(D(2023, 12, 1), 24), D(2025, 12, 1))

    def test_backwards(self):
        self.assertEqual(billing.add_months(D(2024, 3, 31), -1), D(2024, 2, 29))
        self.assertEqual(billing.add_months(D(2024, 1, 10), -1), D(2023, 12, 10))
        self.assertEqual(billing.add_months(D(2024, 5, 10), -17), D(2022, 12, 10))

    def test_century_leap_year(self):
        self.assertEqual(billing.add_months(D(1999, 12, 31), 2), D(2000, 2, 29))
        self.assertEqual(billing.add_months(D(1899, 12, 31), 2), D(1900, 2, 28))


class BillingDatesTests(unittest.TestCase):
    def test_billed_on_the_31st_when_there_is_one(self):
        self.assertEqual(
            billing.billing_dates(D(2023, 10, 31), 6),
            [D(2023, 10, 31), D(2023, 11, 30), D(2023, 12, 31), D(2024, 1, 31), D(2024, 2, 29), D(2024, 3, 31)],
        )

    def test_no_dates(self):
        self.assertEqual(billing.billing_dates(D(2024, 1, 1), 0), [])


if __name__ == "__main__":
    unittest.main()
