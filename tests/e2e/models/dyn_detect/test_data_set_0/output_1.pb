B
det_scoresJ”l?ë{a?¨&;?