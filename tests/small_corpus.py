"""Hand-written passages shared by the graph-builder and incremental-update tests."""

from kgrag_plugins.types import Passage

# "Hank Snow" is first seen as a mention in CASH, then titles SNOW.
CASH = Passage(
    "cash",
    "Johnny Cash admired Hank Snow. Cash was born in Kingsland, Arkansas. He toured with Elvis Presley in 1955.",
    "Johnny Cash",
)
SNOW = Passage(
    "snow",
    "Hank Snow was a Canadian country music singer. He was born in Liverpool, Nova Scotia in 1914. "
    "Snow recorded more than 140 albums.",
    "Hank Snow",
)
OBAMA = Passage(
    "obama", "Barack Obama was born in Honolulu. Obama served as president of the United States.", "Barack Obama"
)
# A subject of an excluded head type (NORP) and a title that its text never repeats.
REUNIFICATION = Passage("reunif", "Germans celebrated the reunification in Berlin.", "German reunification")
SMALL = [CASH, SNOW, OBAMA]
