"""Calendar arithmetic for the Gregorian calendar."""


def is_leap(year):
    """Whether `year` has a 29 February."""
    return year % 4 == 0 and year % 100 != 0


def days_in_month(year, month):
    """The number of days of `month` (1-12) in `year`."""
    if not 1 <= month <= 12:
        raise ValueError(f"no month {month}")
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31
